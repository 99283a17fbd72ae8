package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// fakeClock is a settable clock shared by the Service and the test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// idp is an upstream identity provider made up for a test: a signing key
// and its JWKS in a file.
type idp struct {
	t        *testing.T
	key      *ecdsa.PrivateKey
	kid      string
	jwksFile string
	jwks     []byte
}

const (
	testIssuer   = "https://idp.example.test"
	testAudience = "felix-test"
)

func newIDP(t *testing.T) *idp {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	p := &idp{t: t, key: k, kid: "idp-key-1"}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: p.kid, Algorithm: string(jose.ES256), Use: "sig"}}}
	p.jwks, err = json.Marshal(set)
	must(t, err)
	p.jwksFile = filepath.Join(t.TempDir(), "jwks.json")
	must(t, os.WriteFile(p.jwksFile, p.jwks, 0o600))
	return p
}

// upstreamClaims are the claims of a made-up upstream token.
type upstreamClaims struct {
	jwt.Claims
	Email string `json:"email,omitempty"`
}

// sign signs claims with key under the IdP's key id.
func (p *idp) signWith(key *ecdsa.PrivateKey, c upstreamClaims) string {
	p.t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: p.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	must(p.t, err)
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	must(p.t, err)
	return tok
}

// token is a valid upstream token for sub at now.
func (p *idp) token(sub string, now time.Time) string {
	return p.signWith(p.key, p.claims(sub, now))
}

func (p *idp) claims(sub string, now time.Time) upstreamClaims {
	return upstreamClaims{Claims: jwt.Claims{Issuer: testIssuer, Subject: sub, Audience: jwt.Audience{testAudience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}}
}

// newAuthHarness is a harness whose Service runs on clock with a 10s
// refresh grace, with tenant "acme" whose issuer is p.
func newAuthHarness(t *testing.T, p *idp, clock *fakeClock) *harness {
	t.Helper()
	h := &harness{t: t, path: t.TempDir()}
	store := openTestRaft(t, h.path)
	svc, err := New(Config{Logger: quietLogger(), Now: clock.Now, RefreshReuseGrace: 10 * time.Second}, store)
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	h.svc = svc
	h.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(func() {
		h.srv.Close()
		h.svc.Close()
	})
	h.admin = h.token("default", "admin", "*:*")
	h.expect(201, "POST", "/v1/tenants", h.admin, map[string]any{"tenant_id": "acme"}, nil)
	h.expect(200, "PUT", "/v1/tenants/acme/oidc", h.admin, OIDCConfig{Issuer: testIssuer, Audience: testAudience, JWKSFile: p.jwksFile}, nil)
	return h
}

func newClock() *fakeClock { return &fakeClock{t: time.Now().Truncate(time.Second)} }

// exchange posts an exchange and decodes a 200 answer.
func (h *harness) exchange(body map[string]any) exchangeResponse {
	h.t.Helper()
	var out exchangeResponse
	h.expect(200, "POST", "/v1/tenants/acme/token/exchange", "", body, &out)
	return out
}

func (h *harness) grant(role, principal string, perms ...string) {
	h.t.Helper()
	h.expect(200, "PUT", "/v1/tenants/acme/policies/"+role, h.admin, map[string]any{"permissions": perms}, nil)
	h.expect(200, "PUT", "/v1/tenants/acme/principals/"+principal+"/roles/"+role, h.admin, nil, nil)
}

// verify checks a Felix token against the service's JWKS.
func (h *harness) verify(tok string) *auth.Identity {
	h.t.Helper()
	jwks, err := h.svc.JWKS(bg)
	must(h.t, err)
	v := auth.NewVerifier(auth.VerifierOptions{Now: h.svc.now})
	must(h.t, v.SetJWKS(jwks))
	id, err := v.Verify(bg, tok, "acme")
	must(h.t, err)
	return id
}

func TestExchangeRefusals(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*")
	now := clock.Now()
	const path = "/v1/tenants/acme/token/exchange"

	wrongIss := p.claims("alice", now)
	wrongIss.Issuer = "https://evil.example.test"
	wrongAud := p.claims("alice", now)
	wrongAud.Audience = jwt.Audience{"someone-else"}
	expired := p.claims("alice", now.Add(-3*time.Hour))
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	for _, c := range []struct {
		name, token, want string
	}{
		{"wrong issuer", p.signWith(p.key, wrongIss), "wrong issuer"},
		{"wrong audience", p.signWith(p.key, wrongAud), "wrong audience"},
		{"expired", p.signWith(p.key, expired), "token expired"},
		{"bad signature", p.signWith(other, p.claims("alice", now)), "bad signature"},
		{"garbage", "not-a-jwt", "malformed token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			h.expectError(401, "unauthorized", "POST", path, "", map[string]any{"oidc_token": c.token}, c.want)
		})
	}
	h.t = t
	good := p.token("alice", now)
	h.expectError(401, "unauthorized", "POST", path, "", map[string]any{}, "missing OIDC token")
	h.expectError(404, "not_found", "POST", "/v1/tenants/nope/token/exchange", "", map[string]any{"oidc_token": good}, "nope")
	h.expect(201, "POST", "/v1/tenants", h.admin, map[string]any{"tenant_id": "bare"}, nil)
	h.expectError(404, "not_found", "POST", "/v1/tenants/bare/token/exchange", "", map[string]any{"oidc_token": good}, "no OIDC issuer")
	h.expectError(400, "invalid_request", "POST", path, "", map[string]any{"oidc_token": good, "ttl_seconds": 999999}, "ttl_seconds")
	h.expectError(400, "invalid_request", "POST", path, "", map[string]any{"oidc_token": good, "bogus": 1}, "bogus")
	h.expectError(403, "forbidden", "POST", path, "", map[string]any{"oidc_token": p.token("mallory", now)}, "no roles")
	h.expectError(403, "forbidden", "POST", path, "", map[string]any{"oidc_token": good,
		"actions": []string{"stream.publish"}}, "outside")
	h.expectError(403, "forbidden", "POST", path, "", map[string]any{"oidc_token": good,
		"resources": []string{"stream:acme/staging/*"}}, "outside")
	h.expectError(400, "invalid_request", "PUT", "/v1/tenants/acme/oidc", h.admin,
		OIDCConfig{Issuer: testIssuer, Audience: testAudience, JWKSFile: "a", JWKSURL: "https://x"}, "exactly one")
}

func TestExchangeGrantsAndNarrowing(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*")
	h.grant("cache", "alice", "cache.read:cache:acme/prod/users/alice", "cache.write:cache:acme/prod/users/alice/*")

	// Everything granted, token in the Authorization header.
	var out exchangeResponse
	h.expect(200, "POST", "/v1/tenants/acme/token/exchange", p.token("alice", clock.Now()), nil, &out)
	if out.Subject != "alice" || len(out.Permissions) != 3 || out.RefreshToken == "" {
		t.Fatalf("answer %+v", out)
	}
	id := h.verify(out.Token)
	checks := []struct {
		a    auth.Action
		r    string
		want bool
	}{
		{auth.ActionStreamSubscribe, "stream:acme/prod/orders", true},
		{auth.ActionStreamPublish, "stream:acme/prod/orders", false},
		{auth.ActionStreamSubscribe, "stream:acme/staging/orders", false},
		{auth.ActionCacheRead, auth.CacheResource("acme", "prod", "users", "alice"), true},
		{auth.ActionCacheRead, auth.CacheResource("acme", "prod", "users", "bob"), false},
		{auth.ActionCacheWrite, auth.CacheResource("acme", "prod", "users", "alice/settings"), true},
		{auth.ActionCacheWrite, auth.CacheResource("acme", "prod", "users", "alice"), false},
		{auth.ActionCacheWrite, auth.CacheResource("acme", "prod", "users", "bob/settings"), false},
	}
	for _, c := range checks {
		if got := id.Perms.Allows(c.a, c.r); got != c.want {
			t.Errorf("Allows(%s, %s) = %v, want %v", c.a, c.r, got, c.want)
		}
	}

	// Narrowed to one stream and a wider (refused) action.
	out = h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now()),
		"actions": []string{"stream.subscribe", "stream.publish"}, "resources": []string{"stream:acme/prod/orders"}})
	if len(out.Permissions) != 1 || out.Permissions[0] != "stream.subscribe:stream:acme/prod/orders" {
		t.Fatalf("narrowed perms %v", out.Permissions)
	}
	id = h.verify(out.Token)
	if id.Perms.Allows(auth.ActionStreamSubscribe, "stream:acme/prod/payments") || !id.Perms.Allows(auth.ActionStreamSubscribe, "stream:acme/prod/orders") {
		t.Fatal("narrowed token does not match its permissions")
	}
	if id.Expiry.Sub(clock.Now()) != time.Hour {
		t.Fatalf("default ttl: expires %v after now", id.Expiry.Sub(clock.Now()))
	}
}

func TestExchangePrincipalClaimAndJWKSURL(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	idpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(p.jwks) }))
	defer idpSrv.Close()
	h.expect(200, "PUT", "/v1/tenants/acme/oidc", h.admin, OIDCConfig{Issuer: testIssuer, Audience: testAudience,
		JWKSURL: idpSrv.URL, PrincipalClaim: "email"}, nil)
	var cfg OIDCConfig
	h.expect(200, "GET", "/v1/tenants/acme/oidc", h.admin, nil, &cfg)
	if cfg.JWKSURL != idpSrv.URL || cfg.PrincipalClaim != "email" {
		t.Fatalf("stored config %+v", cfg)
	}
	h.grant("reader", "alice@example.test", "stream.subscribe:stream:acme/*")
	c := p.claims("u-123", clock.Now())
	c.Email = "alice@example.test"
	out := h.exchange(map[string]any{"oidc_token": p.signWith(p.key, c)})
	if out.Subject != "alice@example.test" {
		t.Fatalf("subject %q", out.Subject)
	}
	h.expectError(401, "unauthorized", "POST", "/v1/tenants/acme/token/exchange", "",
		map[string]any{"oidc_token": p.token("u-123", clock.Now())}, `claim "email"`)
}

func TestRBACRevocations(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*")
	h.grant("reader", "bob", "stream.subscribe:stream:acme/prod/*")
	revoked := func() map[string]int64 {
		t.Helper()
		var l listBody[struct {
			Subject       string `json:"subject"`
			RevokedBefore int64  `json:"revoked_before"`
		}]
		h.expect(200, "GET", "/v1/tenants/acme/revocations", h.admin, nil, &l)
		m := map[string]int64{}
		for _, r := range l.Items {
			m[r.Subject] = r.RevokedBefore
		}
		return m
	}
	// Widening a role revokes nobody.
	h.expect(200, "PUT", "/v1/tenants/acme/policies/reader", h.admin, map[string]any{"permissions": []string{
		"stream.subscribe:stream:acme/prod/*", "stream.subscribe:stream:acme/dev/*"}}, nil)
	if len(revoked()) != 0 {
		t.Fatalf("widening revoked %v", revoked())
	}
	tok := h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now())}).Token
	// Unassigning revokes that principal only, covering the token just minted.
	h.expect(204, "DELETE", "/v1/tenants/acme/principals/alice/roles/reader", h.admin, nil, nil)
	r := revoked()
	if _, ok := r["alice"]; !ok || len(r) != 1 {
		t.Fatalf("revocations after unassign: %v", r)
	}
	if id := h.verify(tok); !auth.Covers(revocationOf(r, "alice"), id) {
		t.Fatal("revocation does not cover the token minted just before it")
	}
	h.expectError(403, "forbidden", "POST", "/v1/tenants/acme/token/exchange", "", map[string]any{"oidc_token": p.token("alice", clock.Now())}, "no roles")
	// A new token after the revocation is not covered by it.
	h.grant("reader2", "alice", "stream.subscribe:stream:acme/prod/x")
	fresh := h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now())}).Token
	if auth.Covers(revocationOf(revoked(), "alice"), h.verify(fresh)) {
		t.Fatal("revocation covers a token minted after it")
	}
	// Narrowing a role revokes its principals.
	h.expect(200, "PUT", "/v1/tenants/acme/policies/reader", h.admin, map[string]any{"permissions": []string{"stream.subscribe:stream:acme/dev/*"}}, nil)
	if _, ok := revoked()["bob"]; !ok {
		t.Fatal("narrowing did not revoke bob")
	}
	// Removing a principal drops all its roles.
	h.grant("other", "carol", "stream.subscribe:stream:acme/a")
	h.grant("reader", "carol", "stream.subscribe:stream:acme/a")
	h.expect(204, "DELETE", "/v1/tenants/acme/principals/carol", h.admin, nil, nil)
	var as listBody[Assignment]
	h.expect(200, "GET", "/v1/tenants/acme/assignments?principal=carol", h.admin, nil, &as)
	if len(as.Items) != 0 {
		t.Fatalf("carol still has %v", as.Items)
	}
	if _, ok := revoked()["carol"]; !ok {
		t.Fatal("removing carol did not revoke her")
	}
	h.expectError(404, "not_found", "PUT", "/v1/tenants/acme/principals/dave/roles/ghost", h.admin, nil, "ghost")
	h.expectError(404, "not_found", "DELETE", "/v1/tenants/acme/policies/ghost", h.admin, nil, "ghost")
	h.expectError(400, "invalid_request", "PUT", "/v1/tenants/acme/policies/bad", h.admin, map[string]any{"permissions": []string{}}, "permissions")
	// Tenant tokens without tenant.manage cannot touch RBAC.
	h.expectError(403, "forbidden", "GET", "/v1/tenants/acme/policies", h.token("acme", "x", "stream.publish:*"), nil, "tenant.manage")
}

func revocationOf(m map[string]int64, sub string) (r wire.Revocation) {
	return wire.Revocation{TenantID: "acme", Subject: sub, RevokedBefore: m[sub]}
}

func TestSigningKeyRetirement(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	kids := func() []string {
		var doc struct {
			Keys []struct {
				KID string `json:"kid"`
			} `json:"keys"`
		}
		_, raw := h.do("GET", "/v1/jwks", "", nil)
		must(t, json.Unmarshal(raw, &doc))
		var out []string
		for _, k := range doc.Keys {
			out = append(out, k.KID)
		}
		return out
	}
	first := kids()[0]
	h.expectError(403, "forbidden", "POST", "/v1/signing-keys/rotate", h.token("acme", "x", "tenant.manage:tenant:acme"), nil, "cluster.manage")
	var rot rotateResponse
	h.expect(200, "POST", "/v1/signing-keys/rotate", h.admin, nil, &rot)
	if rot.KID == first || len(rot.KIDs) != 2 || rot.KIDs[1] != first {
		t.Fatalf("after rotation: %+v (first %s)", rot, first)
	}
	// Until the longest token could have expired, the old key stays,
	// through further rotations too.
	clock.Add(retiredKeyLife - time.Minute)
	second := rot.KID
	h.admin = clockToken(h, clock)
	h.expect(200, "POST", "/v1/signing-keys/rotate", h.admin, nil, &rot)
	if !strings.Contains(strings.Join(rot.KIDs, ","), first) || len(rot.KIDs) != 3 {
		t.Fatalf("old key dropped early: %+v", rot)
	}
	// Then it goes.
	clock.Add(2 * time.Minute)
	h.admin = clockToken(h, clock)
	h.expect(200, "POST", "/v1/signing-keys/rotate", h.admin, nil, &rot)
	got := strings.Join(rot.KIDs, ",")
	if strings.Contains(got, first) || !strings.Contains(got, second) || len(rot.KIDs) != 3 {
		t.Fatalf("expired key kept or live key dropped: %v (first %s, second %s)", rot.KIDs, first, second)
	}
}

// clockToken is a cluster admin token valid at the clock's now.
func clockToken(h *harness, clock *fakeClock) string {
	h.t.Helper()
	tok, err := h.svc.MintToken(auth.Claims{Subject: "admin", TenantID: "default", Perms: []string{"*:*"}, Expiry: clock.Now().Add(time.Hour)})
	must(h.t, err)
	return tok
}

// TestRotationSeenByOtherMembers: a member that meets a token signed by a
// key rotated elsewhere reloads the keys and signs with the new one.
func TestRotationSeenByOtherMembers(t *testing.T) {
	store := openTestRaft(t, t.TempDir())
	a, err := New(Config{Logger: quietLogger()}, store)
	must(t, err)
	defer a.Close()
	b, err := New(Config{Logger: quietLogger()}, store) // same store: stands in for another member
	must(t, err)
	must(t, a.RotateSigningKey(bg))
	tok, err := a.MintToken(auth.Claims{Subject: "admin", TenantID: "default", Perms: []string{"*:*"}, Expiry: time.Now().Add(time.Hour)})
	must(t, err)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	h := &harness{t: t, srv: srv, svc: b}
	h.expect(200, "GET", "/v1/tenants", tok, nil, nil)
	fromB, err := b.MintToken(auth.Claims{Subject: "x", TenantID: "default", Perms: []string{"*:*"}, Expiry: time.Now().Add(time.Hour)})
	must(t, err)
	if tokenKID(t, fromB) != tokenKID(t, tok) {
		t.Fatal("the other member still signs with the old key")
	}
}

// Deleting a tenant removes its identity provider, so a tenant created
// again under the same name does not inherit it.
func TestDeletedTenantForgetsItsIssuer(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.expect(200, "GET", "/v1/tenants/acme/oidc", h.admin, nil, nil)
	h.expect(204, "DELETE", "/v1/tenants/acme?recursive=true", h.admin, nil, nil)
	h.expect(201, "POST", "/v1/tenants", h.admin, map[string]any{"tenant_id": "acme"}, nil)
	h.expectError(404, "not_found", "GET", "/v1/tenants/acme/oidc", h.admin, nil, "OIDC")
}

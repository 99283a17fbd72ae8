package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	testIssuer   = "https://idp.example.test"
	testAudience = "felix-control-plane"
)

// upstreamKey is an identity provider's signing key in a test.
type upstreamKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newRSAKey(t testing.TB, kid string) upstreamKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return upstreamKey{kid: kid, alg: jose.RS256, priv: k}
}

func newECKey(t testing.TB, kid string) upstreamKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return upstreamKey{kid: kid, alg: jose.ES256, priv: k}
}

func jwksOf(t testing.TB, keys ...upstreamKey) []byte {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upstreamClaims are the claims of a test token; extra adds custom ones.
type upstreamClaims struct {
	jwt.Claims
	Groups []string `json:"groups,omitempty"`
}

func (k upstreamKey) sign(t testing.TB, kid string, c any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func goodClaims(now time.Time) upstreamClaims {
	return upstreamClaims{Claims: jwt.Claims{Issuer: testIssuer, Subject: "user-1", Audience: jwt.Audience{"other", testAudience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))},
		Groups: []string{"ops"}}
}

// jwksServer serves a swappable JWKS on 127.0.0.1 and counts requests.
type jwksServer struct {
	mu   sync.Mutex
	doc  []byte
	hits atomic.Int32
	srv  *httptest.Server
}

func newJWKSServer(t *testing.T, doc []byte) *jwksServer {
	js := &jwksServer{doc: doc}
	js.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		js.hits.Add(1)
		js.mu.Lock()
		defer js.mu.Unlock()
		w.Write(js.doc)
	}))
	t.Cleanup(js.srv.Close)
	return js
}

func (js *jwksServer) set(doc []byte) {
	js.mu.Lock()
	js.doc = doc
	js.mu.Unlock()
}

func urlVerifier(t *testing.T, js *jwksServer, clock *fakeClock) *OIDCVerifier {
	t.Helper()
	v, err := NewOIDCVerifier(OIDCIssuer{Issuer: testIssuer, Audience: testAudience, JWKSURL: js.srv.URL + "/jwks"},
		OIDCOptions{HTTPClient: js.srv.Client(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOIDCVerifyRS256AndES256(t *testing.T) {
	clock := newFakeClock()
	rk, ek := newRSAKey(t, "rsa-1"), newECKey(t, "ec-1")
	js := newJWKSServer(t, jwksOf(t, rk, ek))
	v := urlVerifier(t, js, clock)
	for _, k := range []upstreamKey{rk, ek} {
		id, err := v.Verify(context.Background(), k.sign(t, k.kid, goodClaims(clock.Now())))
		if err != nil {
			t.Fatalf("%s: %v", k.alg, err)
		}
		if id.Subject != "user-1" || !id.Expiry.Equal(clock.Now().Add(time.Hour).Truncate(time.Second)) {
			t.Fatalf("%s: identity %+v", k.alg, id)
		}
		if g, ok := id.Claims["groups"].([]any); !ok || len(g) != 1 || g[0] != "ops" {
			t.Fatalf("%s: raw claims %v", k.alg, id.Claims)
		}
	}
	if js.hits.Load() != 1 {
		t.Fatalf("JWKS fetched %d times, want once (cached)", js.hits.Load())
	}
}

func TestOIDCRefusals(t *testing.T) {
	clock := newFakeClock()
	rk, ek := newRSAKey(t, "rsa-1"), newECKey(t, "ec-1")
	stranger := newECKey(t, "ec-1") // same kid, different key
	js := newJWKSServer(t, jwksOf(t, rk, ek))
	v := urlVerifier(t, js, clock)
	now := clock.Now()
	edit := func(f func(*upstreamClaims)) upstreamClaims {
		c := goodClaims(now)
		f(&c)
		return c
	}
	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hsTok, _ := jwt.Signed(hs).Claims(goodClaims(now)).Serialize()
	cases := []struct {
		name, token, want string
	}{
		{"wrong issuer", ek.sign(t, "ec-1", edit(func(c *upstreamClaims) { c.Issuer = "https://evil.test" })), "wrong issuer"},
		{"wrong audience", rk.sign(t, "rsa-1", edit(func(c *upstreamClaims) { c.Audience = jwt.Audience{"other"} })), "wrong audience"},
		{"expired", ek.sign(t, "ec-1", edit(func(c *upstreamClaims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Minute)) })), "token expired"},
		{"not yet valid", ek.sign(t, "ec-1", edit(func(c *upstreamClaims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Minute)) })), "token not yet valid"},
		{"bad signature", stranger.sign(t, "ec-1", goodClaims(now)), "bad signature"},
		{"unknown signing key", ek.sign(t, "ec-9", goodClaims(now)), "unknown signing key"},
		{"no exp", ek.sign(t, "ec-1", edit(func(c *upstreamClaims) { c.Expiry = nil })), "malformed token"},
		{"no subject", ek.sign(t, "ec-1", edit(func(c *upstreamClaims) { c.Subject = "" })), "malformed token"},
		{"garbage", "not.a.token", "malformed token"},
		{"empty", "", "malformed token"},
		{"hmac", hsTok, "malformed token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), tc.token)
			wantUnauthorized(t, err, tc.want)
		})
	}
	// Within the leeway both time checks pass.
	ok := ek.sign(t, "ec-1", edit(func(c *upstreamClaims) {
		c.Expiry = jwt.NewNumericDate(now.Add(-10 * time.Second))
		c.NotBefore = jwt.NewNumericDate(now.Add(10 * time.Second))
	}))
	if _, err := v.Verify(context.Background(), ok); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
}

func TestOIDCURLRotationAndRefetchLimit(t *testing.T) {
	clock := newFakeClock()
	k1, k2 := newECKey(t, "k1"), newRSAKey(t, "k2")
	js := newJWKSServer(t, jwksOf(t, k1))
	v := urlVerifier(t, js, clock)
	ctx := context.Background()
	if _, err := v.Verify(ctx, k1.sign(t, "k1", goodClaims(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	js.set(jwksOf(t, k1, k2))
	// Right after a fetch, an unknown kid does not fetch again.
	_, err := v.Verify(ctx, k2.sign(t, "k2", goodClaims(clock.Now())))
	wantUnauthorized(t, err, "unknown signing key")
	if js.hits.Load() != 1 {
		t.Fatalf("%d fetches, want 1 within MinRefetch", js.hits.Load())
	}
	clock.Advance(DefaultOIDCMinRefetch + time.Second)
	if _, err := v.Verify(ctx, k2.sign(t, "k2", goodClaims(clock.Now()))); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if js.hits.Load() != 2 {
		t.Fatalf("%d fetches, want 2", js.hits.Load())
	}
}

func TestOIDCJWKSFileReloadsWhenChanged(t *testing.T) {
	clock := newFakeClock()
	k1, k2 := newECKey(t, "k1"), newECKey(t, "k2")
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksOf(t, k1), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := NewOIDCVerifier(OIDCIssuer{Issuer: testIssuer, Audience: testAudience, JWKSFile: path},
		OIDCOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.Verify(ctx, k1.sign(t, "k1", goodClaims(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	// Replace the file with the new key only (a different size, and a
	// later modification time).
	doc := jwksOf(t, k2)
	doc = append(doc, '\n', '\n')
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if _, err := v.Verify(ctx, k2.sign(t, "k2", goodClaims(clock.Now()))); err != nil {
		t.Fatalf("new key from the changed file: %v", err)
	}
	_, err = v.Verify(ctx, k1.sign(t, "k1", goodClaims(clock.Now())))
	wantUnauthorized(t, err, "unknown signing key")
}

func TestOIDCIssuerValidation(t *testing.T) {
	for _, iss := range []OIDCIssuer{
		{Audience: "a", JWKSURL: "http://x"},
		{Issuer: "i", JWKSURL: "http://x"},
		{Issuer: "i", Audience: "a"},
		{Issuer: "i", Audience: "a", JWKSURL: "http://x", JWKSFile: "/f"},
	} {
		if _, err := NewOIDCVerifier(iss, OIDCOptions{}); err == nil {
			t.Errorf("%+v accepted", iss)
		}
	}
}

func TestOIDCBadJWKSKeepsOldKeys(t *testing.T) {
	clock := newFakeClock()
	k1 := newECKey(t, "k1")
	js := newJWKSServer(t, jwksOf(t, k1))
	v := urlVerifier(t, js, clock)
	ctx := context.Background()
	if _, err := v.Verify(ctx, k1.sign(t, "k1", goodClaims(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	js.set([]byte("{not json"))
	clock.Advance(time.Minute)
	_, err := v.Verify(ctx, k1.sign(t, "k9", goodClaims(clock.Now())))
	wantUnauthorized(t, err, "unknown signing key")
	if _, err := v.Verify(ctx, k1.sign(t, "k1", goodClaims(clock.Now()))); err != nil {
		t.Fatalf("old key lost after a bad JWKS: %v", err)
	}
}

func FuzzOIDCVerify(f *testing.F) {
	clock := newFakeClock()
	rk, ek := newRSAKey(f, "rsa-1"), newECKey(f, "ec-1")
	path := filepath.Join(f.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksOf(f, rk, ek), 0o600); err != nil {
		f.Fatal(err)
	}
	v, err := NewOIDCVerifier(OIDCIssuer{Issuer: testIssuer, Audience: testAudience, JWKSFile: path}, OIDCOptions{Now: clock.Now})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rk.sign(f, "rsa-1", goodClaims(clock.Now())))
	f.Add(ek.sign(f, "ec-1", goodClaims(clock.Now())))
	f.Add(ek.sign(f, "", goodClaims(clock.Now())))
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, token string) {
		id, err := v.Verify(context.Background(), token)
		if err == nil && id.Subject == "" {
			t.Fatal("accepted a token without a subject")
		}
	})
}

package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/felixmq/felix/wire"
)

// fakeClock is an injectable Now that tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixture is one signing key, a Signer for it and a Verifier that trusts
// it, on a fake clock.
type fixture struct {
	key    *SigningKey
	signer *Signer
	clock  *fakeClock
	v      *Verifier
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{key: mustKey(t), clock: newFakeClock()}
	f.signer = NewSigner(f.key)
	f.v = NewVerifier(VerifierOptions{Now: f.clock.Now})
	doc, err := f.signer.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.v.SetJWKS(doc); err != nil {
		t.Fatal(err)
	}
	return f
}

// claims returns valid claims for tenant acme issued at the fake now.
func (f *fixture) claims() Claims {
	now := f.clock.Now()
	return Claims{
		Subject:  "alice",
		TenantID: "acme",
		Perms:    []string{"stream.publish:stream:acme/prod/*"},
		IssuedAt: now,
		Expiry:   now.Add(time.Hour),
	}
}

func (f *fixture) sign(t testing.TB, c Claims) string {
	t.Helper()
	tok, err := f.signer.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// signRaw signs arbitrary claims with priv, naming kid in the header, so
// tests can build tokens Sign would never produce.
func signRaw(t testing.TB, k *SigningKey, kid string, claims any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.priv, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// wantUnauthorized checks err is a *wire.Error unauthorized with msg.
func wantUnauthorized(t *testing.T, err error, msg string) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Fatalf("err = %v (%T), want *wire.Error", err, err)
	}
	if we.Code != wire.CodeUnauthorized || we.Message != msg {
		t.Fatalf("err = %v, want unauthorized %q", we, msg)
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	f := newFixture(t)
	c := f.claims()
	id, err := f.v.Verify(context.Background(), f.sign(t, c), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "alice" || id.TenantID != "acme" || !id.Expiry.Equal(c.Expiry) {
		t.Fatalf("identity = %+v", id)
	}
	if !id.Perms.Allows(ActionStreamPublish, StreamResource("acme", "prod", "orders")) {
		t.Fatal("granted permission refused")
	}
	if id.Perms.Allows(ActionStreamSubscribe, StreamResource("acme", "prod", "orders")) {
		t.Fatal("ungranted action allowed")
	}
}

func TestSignFillsClaims(t *testing.T) {
	f := newFixture(t)
	tok := f.sign(t, Claims{TenantID: "acme", Expiry: time.Now().Add(time.Hour)})
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	if kid := parsed.Headers[0].KeyID; kid != f.key.KID() {
		t.Fatalf("kid = %q, want %q", kid, f.key.KID())
	}
	var c tokenClaims
	if err := parsed.Claims(&f.key.priv.PublicKey, &c); err != nil {
		t.Fatal(err)
	}
	if c.Issuer != Issuer || !c.Audience.Contains(Audience) || c.IssuedAt == nil || c.NotBefore == nil ||
		len(c.ID) != 32 || c.Perms == nil {
		t.Fatalf("claims = %+v", c)
	}
}

func TestSignRefusals(t *testing.T) {
	f := newFixture(t)
	for name, c := range map[string]Claims{
		"no expiry": {TenantID: "acme"},
		"no tenant": {Expiry: time.Now().Add(time.Hour)},
		"bad perm":  {TenantID: "acme", Expiry: time.Now().Add(time.Hour), Perms: []string{"nocolon"}},
	} {
		if _, err := f.signer.Sign(c); err == nil {
			t.Errorf("%s: Sign succeeded", name)
		}
	}
	if _, err := NewSigner(nil).Sign(f.claims()); err == nil {
		t.Error("Sign without a key succeeded")
	}
}

func TestVerifyRefusals(t *testing.T) {
	f := newFixture(t)
	other := mustKey(t)
	now := f.clock.Now()
	base := toTokenClaims(f.claims())
	base.ID = "x"
	with := func(edit func(*tokenClaims)) tokenClaims { c := base; edit(&c); return c }
	good := f.sign(t, f.claims())
	tampered := tamper(t, good, func(c map[string]any) { c["tid"] = "acme2" })

	cases := []struct {
		name, token, tenant, msg string
	}{
		{"missing", "", "acme", "missing token"},
		{"garbage", "not-a-jwt", "acme", "malformed token"},
		{"three dots", "a.b.c", "acme", "malformed token"},
		{"oversized", strings.Repeat("a", MaxTokenBytes+1), "acme", "malformed token"},
		{"expired", f.sign(t, Claims{TenantID: "acme", IssuedAt: now.Add(-2 * time.Hour), Expiry: now.Add(-time.Minute)}), "acme", "token expired"},
		{"not yet valid", f.sign(t, Claims{TenantID: "acme", NotBefore: now.Add(time.Minute), Expiry: now.Add(time.Hour)}), "acme", "token not yet valid"},
		{"other key, our kid", signRaw(t, other, f.key.KID(), base), "acme", "bad signature"},
		{"tampered payload", tampered, "acme2", "bad signature"},
		{"other key, its kid", signRaw(t, other, other.KID(), base), "acme", "unknown signing key"},
		{"no kid", signRaw(t, f.key, "", base), "acme", "unknown signing key"},
		{"wrong issuer", signRaw(t, f.key, f.key.KID(), with(func(c *tokenClaims) { c.Issuer = "evil" })), "acme", "wrong issuer"},
		{"wrong audience", signRaw(t, f.key, f.key.KID(), with(func(c *tokenClaims) { c.Audience = jwt.Audience{"other"} })), "acme", "wrong audience"},
		{"no audience", signRaw(t, f.key, f.key.KID(), with(func(c *tokenClaims) { c.Audience = nil })), "acme", "wrong audience"},
		{"no expiry", signRaw(t, f.key, f.key.KID(), with(func(c *tokenClaims) { c.Expiry = nil })), "acme", "malformed token"},
		{"bad perms", signRaw(t, f.key, f.key.KID(), with(func(c *tokenClaims) { c.Perms = []string{":x"} })), "acme", "malformed token"},
		{"tenant mismatch", good, "acme2", "tenant mismatch"},
		{"empty tenant", good, "", "tenant mismatch"},
		{"perms not strings", signRaw(t, f.key, f.key.KID(), map[string]any{"iss": Issuer, "aud": Audience, "tid": "acme", "exp": now.Add(time.Hour).Unix(), "perms": 7}), "acme", "malformed token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.v.Verify(context.Background(), c.token, c.tenant)
			wantUnauthorized(t, err, c.msg)
		})
	}
}

// tamper rewrites the payload of token through edit, keeping the header
// and the (now wrong) signature.
func tamper(t *testing.T, token string, edit func(map[string]any)) string {
	t.Helper()
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	if raw, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
}

func TestVerifyLeeway(t *testing.T) {
	f := newFixture(t)
	c := f.claims()
	c.Expiry = f.clock.Now().Add(time.Minute)
	tok := f.sign(t, c)
	f.clock.Advance(time.Minute + DefaultLeeway) // at exp+leeway: still accepted
	if _, err := f.v.Verify(context.Background(), tok, "acme"); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	f.clock.Advance(time.Second)
	_, err := f.v.Verify(context.Background(), tok, "acme")
	wantUnauthorized(t, err, "token expired")

	c = f.claims()
	c.NotBefore = f.clock.Now().Add(DefaultLeeway)
	if _, err := f.v.Verify(context.Background(), f.sign(t, c), "acme"); err != nil {
		t.Fatalf("nbf within leeway: %v", err)
	}
}

func TestVerifyAudienceAsString(t *testing.T) {
	f := newFixture(t)
	exp := f.clock.Now().Add(time.Hour).Unix()
	tok := signRaw(t, f.key, f.key.KID(), map[string]any{
		"iss": Issuer, "aud": Audience, "sub": "bob", "tid": "acme", "exp": exp, "perms": []string{"*:*"},
	})
	id, err := f.v.Verify(context.Background(), tok, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if !id.Perms.Allows(ActionClusterManage, ClusterResource) {
		t.Fatal("*:* does not allow cluster.manage")
	}
	tok = signRaw(t, f.key, f.key.KID(), map[string]any{
		"iss": Issuer, "aud": []string{"x", Audience}, "tid": "acme", "exp": exp,
	})
	if _, err := f.v.Verify(context.Background(), tok, "acme"); err != nil {
		t.Fatalf("audience array: %v", err)
	}
}

func TestVerifyRejectsOtherAlgorithms(t *testing.T) {
	f := newFixture(t)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")},
		(&jose.SignerOptions{}).WithHeader("kid", f.key.KID()))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(toTokenClaims(f.claims())).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.v.Verify(context.Background(), tok, "acme")
	wantUnauthorized(t, err, "malformed token")
}

func TestKeyRotation(t *testing.T) {
	f := newFixture(t)
	old := f.key
	oldTok := f.sign(t, f.claims())
	next := mustKey(t)
	rotated := NewSigner(next, old)
	doc, err := rotated.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.v.SetJWKS(doc); err != nil {
		t.Fatal(err)
	}
	newTok, err := rotated.Sign(f.claims())
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"old": oldTok, "new": newTok} {
		if _, err := f.v.Verify(context.Background(), tok, "acme"); err != nil {
			t.Errorf("%s key: %v", name, err)
		}
	}
	// Retiring the old key ends its tokens.
	doc, err = NewSigner(next).JWKS()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.v.SetJWKS(doc); err != nil {
		t.Fatal(err)
	}
	_, err = f.v.Verify(context.Background(), oldTok, "acme")
	wantUnauthorized(t, err, "unknown signing key")
}

func TestSetJWKSErrorKeepsOldSet(t *testing.T) {
	f := newFixture(t)
	if err := f.v.SetJWKS([]byte(`{"keys":`)); err == nil {
		t.Fatal("broken JWKS accepted")
	}
	if _, err := f.v.Verify(context.Background(), f.sign(t, f.claims()), "acme"); err != nil {
		t.Fatalf("old key set lost: %v", err)
	}
}

// fetchFixture is a Verifier with no keys whose Fetch serves whatever
// document the test sets, counting calls.
type fetchFixture struct {
	*fixture
	calls atomic.Int32
	mu    sync.Mutex
	doc   []byte
}

func newFetchFixture(t *testing.T, minRefetch time.Duration) *fetchFixture {
	ff := &fetchFixture{fixture: newFixture(t)}
	ff.v = NewVerifier(VerifierOptions{Now: ff.clock.Now, MinRefetch: minRefetch, Fetch: ff.fetch})
	return ff
}

func (ff *fetchFixture) fetch(context.Context) ([]byte, error) {
	ff.calls.Add(1)
	ff.mu.Lock()
	defer ff.mu.Unlock()
	if ff.doc == nil {
		return nil, errors.New("control plane unreachable")
	}
	return ff.doc, nil
}

func (ff *fetchFixture) serve(t *testing.T, s *Signer) {
	doc, err := s.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	ff.mu.Lock()
	ff.doc = doc
	ff.mu.Unlock()
}

func TestUnknownKIDRefetchFindsKey(t *testing.T) {
	ff := newFetchFixture(t, time.Second)
	ff.serve(t, ff.signer)
	if _, err := ff.v.Verify(context.Background(), ff.sign(t, ff.claims()), "acme"); err != nil {
		t.Fatal(err)
	}
	if n := ff.calls.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1", n)
	}
	// A known kid needs no fetch.
	if _, err := ff.v.Verify(context.Background(), ff.sign(t, ff.claims()), "acme"); err != nil || ff.calls.Load() != 1 {
		t.Fatalf("err=%v fetches=%d", err, ff.calls.Load())
	}
}

func TestUnknownKIDRefetchIsRateLimited(t *testing.T) {
	ff := newFetchFixture(t, 10*time.Second)
	ff.serve(t, NewSigner(mustKey(t))) // a JWKS that lacks our key
	tok := ff.sign(t, ff.claims())
	for i := range 3 {
		_, err := ff.v.Verify(context.Background(), tok, "acme")
		wantUnauthorized(t, err, "unknown signing key")
		if n := ff.calls.Load(); n != 1 {
			t.Fatalf("attempt %d: fetches = %d, want 1", i, n)
		}
	}
	ff.serve(t, ff.signer) // the control plane learns the key ...
	ff.clock.Advance(9 * time.Second)
	_, err := ff.v.Verify(context.Background(), tok, "acme")
	wantUnauthorized(t, err, "unknown signing key") // ... but the gap has not passed
	ff.clock.Advance(time.Second)
	if _, err := ff.v.Verify(context.Background(), tok, "acme"); err != nil {
		t.Fatalf("after the gap: %v", err)
	}
	if n := ff.calls.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2", n)
	}
}

func TestUnknownKIDFetchErrorIsUnknownKey(t *testing.T) {
	ff := newFetchFixture(t, time.Second) // doc nil: Fetch fails
	_, err := ff.v.Verify(context.Background(), ff.sign(t, ff.claims()), "acme")
	wantUnauthorized(t, err, "unknown signing key")
}

func TestConcurrentUnknownKIDShareOneFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		doc, err := f.signer.JWKS()
		if err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int32
		release := make(chan struct{})
		v := NewVerifier(VerifierOptions{Now: f.clock.Now, Fetch: func(ctx context.Context) ([]byte, error) {
			calls.Add(1)
			<-release
			return doc, nil
		}})
		tok := f.sign(t, f.claims())
		const n = 8
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := v.Verify(context.Background(), tok, "acme")
				errs <- err
			}()
		}
		synctest.Wait() // every caller is blocked: one in Fetch, the rest waiting on it
		close(release)
		for range n {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if c := calls.Load(); c != 1 {
			t.Fatalf("fetches = %d, want 1", c)
		}
	})
}

func TestWaiterGivesUpWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		release := make(chan struct{})
		v := NewVerifier(VerifierOptions{Now: f.clock.Now, Fetch: func(ctx context.Context) ([]byte, error) {
			<-release
			return nil, errors.New("down")
		}})
		tok := f.sign(t, f.claims())
		first := make(chan error, 1)
		go func() {
			_, err := v.Verify(context.Background(), tok, "acme")
			first <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := v.Verify(ctx, tok, "acme") // waits on the running fetch until ctx ends
		wantUnauthorized(t, err, "unknown signing key")
		close(release)
		wantUnauthorized(t, <-first, "unknown signing key")
	})
}

func TestTokenWithoutKIDDoesNotFetch(t *testing.T) {
	ff := newFetchFixture(t, time.Second)
	ff.serve(t, ff.signer)
	tok := signRaw(t, ff.key, "", toTokenClaims(ff.claims()))
	_, err := ff.v.Verify(context.Background(), tok, "acme")
	wantUnauthorized(t, err, "unknown signing key")
	if n := ff.calls.Load(); n != 0 {
		t.Fatalf("fetches = %d, want 0", n)
	}
}

func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	good := fx.sign(f, fx.claims())
	f.Add(good)
	f.Add("")
	f.Add("a.b.c")
	parts := strings.Split(good, ".")
	f.Add(parts[0] + ".." + parts[2])
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Fuzz(func(t *testing.T, token string) {
		id, err := fx.v.Verify(context.Background(), token, "acme")
		if err == nil {
			if id == nil || id.TenantID != "acme" {
				t.Fatalf("accepted token with identity %+v", id)
			}
			return
		}
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeUnauthorized {
			t.Fatalf("err = %v, want unauthorized", err)
		}
	})
}

// A token verified once is remembered, but every check that depends on the
// call is made again: the tenant, and the key set it was verified against.
func TestVerifiedTokenIsCheckedAgainPerCall(t *testing.T) {
	f := newFixture(t)
	tok := f.sign(t, f.claims())
	if _, err := f.v.Verify(context.Background(), tok, "acme"); err != nil {
		t.Fatal(err)
	}
	_, err := f.v.Verify(context.Background(), tok, "other")
	wantUnauthorized(t, err, "tenant mismatch")
	doc, err := f.signer.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	before := f.v.keys.Load()
	if err := f.v.SetJWKS(doc); err != nil {
		t.Fatal(err)
	}
	if f.v.keys.Load() != before {
		t.Fatal("the same JWKS replaced the key set")
	}
	if _, err := f.v.Verify(context.Background(), tok, "acme"); err != nil {
		t.Fatalf("second verification: %v", err)
	}
}

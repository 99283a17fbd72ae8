package auth

import (
	"context"
	"crypto/ecdsa"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/felixmq/felix/wire"
)

// Defaults for VerifierOptions.
const (
	DefaultMinRefetch = time.Second
	DefaultLeeway     = 5 * time.Second
)

// MaxTokenBytes bounds the token Verify will parse; a longer one is
// malformed.
const MaxTokenBytes = 64 << 10

// VerifierOptions configure a Verifier. Zero values take the defaults.
type VerifierOptions struct {
	// Fetch returns the current JWKS JSON. It is called when a token names
	// a key id the Verifier does not know; nil means keys arrive only
	// through SetJWKS.
	Fetch func(ctx context.Context) ([]byte, error)
	// MinRefetch is the least time between two fetches triggered by
	// unknown key ids. Default 1s.
	MinRefetch time.Duration
	// Leeway is the clock skew tolerated on exp and nbf. Default 5s. It
	// is the same on brokers and control-plane members (both use the
	// default), so a token is accepted by both or by neither.
	Leeway time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Revocations, when set, makes Verify refuse tokens of revoked
	// principals with code revoked.
	Revocations *Revocations
}

// Identity is what a verified token proves: who, for which tenant, since
// and until when, and what it may do.
type Identity struct {
	Subject  string
	TenantID string
	// IssuedAt is the token's iat; zero when the token has none, which a
	// revocation then covers.
	IssuedAt time.Time
	Expiry   time.Time
	Perms    *Matcher
}

// Verifier checks Felix tokens against a JWKS. It is safe for concurrent
// use; Verify never holds a lock while calling Fetch.
type Verifier struct {
	opts   VerifierOptions
	keys   atomic.Pointer[keySet] // never nil after NewVerifier
	fetch  refetcher
	recent verifiedCache
}

// NewVerifier returns a Verifier with an empty key set.
func NewVerifier(o VerifierOptions) *Verifier {
	if o.MinRefetch <= 0 {
		o.MinRefetch = DefaultMinRefetch
	}
	if o.Leeway <= 0 {
		o.Leeway = DefaultLeeway
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &Verifier{opts: o}
	v.keys.Store(&keySet{})
	return v
}

// SetJWKS replaces the key set with the keys in b. On error the previous
// set stays in force.
func (v *Verifier) SetJWKS(b []byte) error {
	ks, err := parseJWKS(b)
	if err != nil {
		return err
	}
	if sameKeys(*v.keys.Load(), ks) {
		return nil // keep the set, and the tokens verified against it
	}
	v.keys.Store(&ks)
	return nil
}

// sameKeys reports whether two key sets hold the same keys under the same
// ids.
func sameKeys(a, b keySet) bool {
	if len(a) != len(b) {
		return false
	}
	for kid, k := range a {
		if o, ok := b[kid]; !ok || !k.Equal(o) {
			return false
		}
	}
	return true
}

func (v *Verifier) lookup(kid string) (*ecdsa.PublicKey, bool) {
	k, ok := (*v.keys.Load())[kid]
	return k, ok
}

// key finds kid, fetching a fresh JWKS once (rate limited) when unknown.
func (v *Verifier) key(ctx context.Context, kid string) (*ecdsa.PublicKey, bool) {
	if k, ok := v.lookup(kid); ok || v.opts.Fetch == nil {
		return k, ok
	}
	v.fetch.refresh(ctx, v.opts.Now(), v.opts.MinRefetch, func(ctx context.Context) {
		if b, err := v.opts.Fetch(ctx); err == nil {
			_ = v.SetJWKS(b) // a bad document keeps the old set; the kid stays unknown
		}
	})
	return v.lookup(kid)
}

func unauthorized(msg string) *wire.Error {
	return wire.NewError(wire.CodeUnauthorized, "%s", msg)
}

// Verify checks token for tenantID and returns its Identity. On success
// the signature was made by a key in the JWKS with ES256, iss is Issuer,
// aud contains Audience, exp (required) and nbf hold within Leeway of
// Now, tid equals tenantID and every permission compiled. Every failure is
// a *wire.Error with code unauthorized whose message names the reason.
func (v *Verifier) Verify(ctx context.Context, token, tenantID string) (*Identity, error) {
	if token == "" {
		return nil, unauthorized("missing token")
	}
	if len(token) > MaxTokenBytes {
		return nil, unauthorized("malformed token")
	}
	e := v.recent.get(token, v.keys.Load())
	if e == nil {
		var err *wire.Error
		if e, err = v.checkSignature(ctx, token); err != nil {
			return nil, err
		}
		v.recent.put(token, e)
	}
	if err := v.checkClaims(&e.claims, tenantID); err != nil {
		return nil, err
	}
	c := &e.claims
	id := &Identity{Subject: c.Subject, TenantID: c.TenantID, Expiry: c.Expiry.Time(), Perms: e.perms}
	if c.IssuedAt != nil {
		id.IssuedAt = c.IssuedAt.Time()
	}
	if err := v.opts.Revocations.Check(id); err != nil {
		return nil, err
	}
	return id, nil
}

// checkSignature parses token, checks its signature against the key it
// names (fetching the JWKS again for an unknown one) and compiles its
// permissions.
func (v *Verifier) checkSignature(ctx context.Context, token string) (*verified, *wire.Error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(tok.Headers) != 1 {
		return nil, unauthorized("malformed token")
	}
	kid := tok.Headers[0].KeyID
	if kid == "" {
		return nil, unauthorized("unknown signing key")
	}
	pub, ok := v.key(ctx, kid)
	if !ok {
		return nil, unauthorized("unknown signing key")
	}
	// The key set the key came from: a later JWKS invalidates the entry.
	keys := v.keys.Load()
	if err := tok.Claims(pub); err != nil {
		return nil, unauthorized("bad signature")
	}
	e := &verified{keys: keys}
	if err := tok.UnsafeClaimsWithoutVerification(&e.claims); err != nil || e.claims.Expiry == nil {
		return nil, unauthorized("malformed token") // signature checked just above
	}
	m, err := CompilePerms(e.claims.Perms)
	if err != nil {
		return nil, unauthorized("malformed token").WithDetail("reason", err.Error())
	}
	e.perms = m
	return e, nil
}

// Expired reports whether id's token has expired by the one rule every
// holder of a Verifier applies, at Verify and at each later use of the
// identity (the broker rechecks before every request of a stream): now is
// later than exp plus Leeway. A zero Expiry never expires.
func (v *Verifier) Expired(id *Identity) bool {
	return !id.Expiry.IsZero() && expiredAt(id.Expiry, v.opts.Now(), v.opts.Leeway)
}

// expiredAt is the expiry rule: past exp by more than leeway.
func expiredAt(exp, now time.Time, leeway time.Duration) bool {
	return now.After(exp.Add(leeway))
}

// checkClaims applies the issuer, audience, time and tenant rules.
func (v *Verifier) checkClaims(c *tokenClaims, tenantID string) *wire.Error {
	now := v.opts.Now()
	switch {
	case c.Issuer != Issuer:
		return unauthorized("wrong issuer")
	case !c.Audience.Contains(Audience):
		return unauthorized("wrong audience")
	case expiredAt(c.Expiry.Time(), now, v.opts.Leeway):
		return unauthorized("token expired").WithDetail(wire.DetailReason, wire.ReasonTokenExpired)
	case c.NotBefore != nil && now.Add(v.opts.Leeway).Before(c.NotBefore.Time()):
		return unauthorized("token not yet valid").WithDetail(wire.DetailReason, wire.ReasonTokenNotYetValid)
	case c.TenantID == "" || c.TenantID != tenantID:
		return unauthorized("tenant mismatch").WithDetail(wire.DetailReason, wire.ReasonTenantMismatch)
	}
	return nil
}

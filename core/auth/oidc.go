package auth

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/felixmq/felix/wire"
)

// OIDCIssuer is an upstream identity provider whose tokens the control
// plane exchanges for Felix tokens. Exactly one of JWKSURL and JWKSFile
// names where its public keys are.
type OIDCIssuer struct {
	Issuer   string // the "iss" its tokens carry, compared exactly
	Audience string // must be one of the tokens' "aud"
	JWKSURL  string // fetched over HTTP(S)
	JWKSFile string // read from disk, re-read when it changes
}

// Defaults for OIDCOptions.
const (
	DefaultOIDCMinRefetch   = 10 * time.Second
	DefaultOIDCLeeway       = 30 * time.Second
	DefaultOIDCHTTPTimeout  = 10 * time.Second
	DefaultOIDCMaxJWKSBytes = 1 << 20
	// oidcFileCheckGap bounds how often a JWKS file is checked for
	// changes when no unknown key id forces it.
	oidcFileCheckGap = time.Second
)

// OIDCOptions tune an OIDCVerifier. Zero values take the defaults.
type OIDCOptions struct {
	// HTTPClient fetches JWKSURL. Default: a client with a 10s timeout.
	HTTPClient *http.Client
	// MinRefetch is the least time between two JWKS loads triggered by an
	// unknown key id. Default 10s.
	MinRefetch time.Duration
	// Leeway is the clock skew tolerated on exp and nbf. Default 30s.
	Leeway time.Duration
	// MaxJWKSBytes bounds the JWKS document. Default 1 MiB.
	MaxJWKSBytes int64
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// OIDCAlgorithms are the signature algorithms an upstream token may use.
var OIDCAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512, jose.ES256, jose.ES384, jose.ES512}

// OIDCIdentity is what a verified upstream token says.
type OIDCIdentity struct {
	Subject string
	Expiry  time.Time
	// Claims is the whole payload, for mapping groups or email later.
	Claims map[string]any
}

// OIDCVerifier checks upstream OIDC tokens of one issuer. It is safe for
// concurrent use.
type OIDCVerifier struct {
	iss    OIDCIssuer
	opts   OIDCOptions
	loader jwksLoader

	keys      atomic.Pointer[upstreamKeys] // nil until the first load
	fetch     refetcher
	checkMu   sync.Mutex
	lastCheck time.Time // last file change check; guarded by checkMu
}

// NewOIDCVerifier returns a verifier for iss. Nothing is loaded until the
// first Verify.
func NewOIDCVerifier(iss OIDCIssuer, o OIDCOptions) (*OIDCVerifier, error) {
	switch {
	case iss.Issuer == "":
		return nil, errors.New("auth: OIDC issuer needs an Issuer")
	case iss.Audience == "":
		return nil, errors.New("auth: OIDC issuer needs an Audience")
	case (iss.JWKSURL == "") == (iss.JWKSFile == ""):
		return nil, errors.New("auth: OIDC issuer needs exactly one of JWKSURL and JWKSFile")
	}
	o = o.withDefaults()
	v := &OIDCVerifier{iss: iss, opts: o}
	if iss.JWKSURL != "" {
		v.loader = &urlLoader{url: iss.JWKSURL, client: o.HTTPClient, maxBody: o.MaxJWKSBytes}
	} else {
		v.loader = &fileLoader{path: iss.JWKSFile, maxBody: o.MaxJWKSBytes}
	}
	return v, nil
}

func (o OIDCOptions) withDefaults() OIDCOptions {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: DefaultOIDCHTTPTimeout}
	}
	if o.MinRefetch <= 0 {
		o.MinRefetch = DefaultOIDCMinRefetch
	}
	if o.Leeway <= 0 {
		o.Leeway = DefaultOIDCLeeway
	}
	if o.MaxJWKSBytes <= 0 {
		o.MaxJWKSBytes = DefaultOIDCMaxJWKSBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Verify checks an upstream token: a single signature by a key of the
// issuer's JWKS with one of OIDCAlgorithms, iss equal to Issuer, aud
// containing Audience, a subject, exp present and not passed, nbf (when
// present) reached, both within Leeway. Every refusal is a *wire.Error
// with code unauthorized and one of the messages "malformed token",
// "unknown signing key", "bad signature", "wrong issuer", "wrong
// audience", "token expired" or "token not yet valid".
func (v *OIDCVerifier) Verify(ctx context.Context, token string) (*OIDCIdentity, error) {
	if token == "" || len(token) > MaxTokenBytes {
		return nil, unauthorized("malformed token")
	}
	tok, err := jwt.ParseSigned(token, OIDCAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, unauthorized("malformed token")
	}
	key, ok := v.key(ctx, tok.Headers[0].KeyID)
	if !ok {
		return nil, unauthorized("unknown signing key")
	}
	if err := tok.Claims(key); err != nil {
		return nil, unauthorized("bad signature")
	}
	var reg jwt.Claims
	var raw map[string]any
	if tok.UnsafeClaimsWithoutVerification(&reg, &raw) != nil { // signature checked just above
		return nil, unauthorized("malformed token")
	}
	if err := v.checkClaims(&reg); err != nil {
		return nil, err
	}
	return &OIDCIdentity{Subject: reg.Subject, Expiry: reg.Expiry.Time(), Claims: raw}, nil
}

func (v *OIDCVerifier) checkClaims(c *jwt.Claims) *wire.Error {
	now := v.opts.Now()
	switch {
	case c.Issuer != v.iss.Issuer:
		return unauthorized("wrong issuer")
	case !c.Audience.Contains(v.iss.Audience):
		return unauthorized("wrong audience")
	case c.Expiry == nil || c.Subject == "":
		return unauthorized("malformed token")
	case now.After(c.Expiry.Time().Add(v.opts.Leeway)):
		return unauthorized("token expired")
	case c.NotBefore != nil && now.Add(v.opts.Leeway).Before(c.NotBefore.Time()):
		return unauthorized("token not yet valid")
	}
	return nil
}

// key finds kid. A file that changed is re-read first (checked at most
// every second); an unknown kid triggers a load, at most one per
// MinRefetch (the first load is never held back), shared by concurrent
// callers.
func (v *OIDCVerifier) key(ctx context.Context, kid string) (any, bool) {
	now := v.opts.Now()
	if v.fileMayHaveChanged(now) {
		v.reload(ctx)
	}
	if k, ok := v.keys.Load().lookup(kid); ok {
		return k, true
	}
	v.fetch.refresh(ctx, now, v.opts.MinRefetch, v.reload)
	return v.keys.Load().lookup(kid)
}

// reload loads and installs the JWKS; a failed or invalid load keeps the
// keys in place.
func (v *OIDCVerifier) reload(ctx context.Context) {
	b, err := v.loader.load(ctx)
	if err != nil {
		return
	}
	if ks, err := parseUpstreamJWKS(b); err == nil {
		v.keys.Store(ks)
	}
}

// fileMayHaveChanged reports a JWKS file replaced since its last load,
// checking at most every oidcFileCheckGap.
func (v *OIDCVerifier) fileMayHaveChanged(now time.Time) bool {
	if _, ok := v.loader.(*fileLoader); !ok || v.keys.Load() == nil {
		return false
	}
	v.checkMu.Lock()
	due := now.Sub(v.lastCheck) >= oidcFileCheckGap || now.Before(v.lastCheck)
	if due {
		v.lastCheck = now
	}
	v.checkMu.Unlock()
	return due && v.loader.changed()
}

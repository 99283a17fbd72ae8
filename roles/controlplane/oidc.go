package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// OIDCConfig is a tenant's upstream identity provider: whose tokens
// POST /v1/tenants/{tenant}/token/exchange accepts. Exactly one of
// JWKSURL and JWKSFile says where the provider's public keys are.
type OIDCConfig struct {
	Issuer         string `json:"issuer"`
	Audience       string `json:"audience"`
	JWKSURL        string `json:"jwks_url,omitempty"`
	JWKSFile       string `json:"jwks_file,omitempty"`
	PrincipalClaim string `json:"principal_claim,omitempty"` // default "sub"
}

// Defaults and limits of token exchange and refresh.
const (
	defaultPrincipalClaim   = "sub"
	maxOIDCFieldLen         = 2048
	defaultRefreshGrace     = 10 * time.Second
	defaultRefreshTokenTTL  = 30 * 24 * time.Hour
	defaultExchangeTokenTTL = 3600      // seconds
	maxExchangeTokenTTL     = 24 * 3600 // seconds
	maxVerifierCache        = 4096      // tenants whose verifier is kept
	envRefreshGrace         = "FELIX_REFRESH_REUSE_GRACE_SECONDS"
	envRefreshTTL           = "FELIX_REFRESH_TOKEN_TTL_SECONDS"
	metaOIDCPrefix          = "oidc/" // + tenant: the tenant's OIDCConfig
)

// authExtras is the Service's state for token exchange and refresh.
type authExtras struct {
	grace      time.Duration
	refreshTTL time.Duration
	oidcOpts   auth.OIDCOptions

	mu        sync.Mutex
	verifiers map[string]cachedVerifier // tenant -> verifier of its current config
}

type cachedVerifier struct {
	cfg OIDCConfig
	v   *auth.OIDCVerifier
}

func newAuthExtras(cfg Config, now func() time.Time, log *slog.Logger) *authExtras {
	x := &authExtras{
		grace:      durationSetting(cfg.RefreshReuseGrace, envRefreshGrace, defaultRefreshGrace, true, log),
		refreshTTL: durationSetting(cfg.RefreshTokenTTL, envRefreshTTL, defaultRefreshTokenTTL, false, log),
		oidcOpts:   cfg.OIDC,
		verifiers:  map[string]cachedVerifier{},
	}
	if x.oidcOpts.Now == nil {
		x.oidcOpts.Now = now
	}
	return x
}

// durationSetting picks v, else the environment variable env (whole
// seconds), else def. A malformed variable is logged and ignored.
func durationSetting(v time.Duration, env string, def time.Duration, zeroOK bool, log *slog.Logger) time.Duration {
	if v > 0 {
		return v
	}
	raw := os.Getenv(env)
	if raw == "" {
		return def
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 || (n == 0 && !zeroOK) || n > 10*365*24*3600 {
		log.Warn("ignoring a malformed setting", "env", env, "value", raw, "default", def)
		return def
	}
	return time.Duration(n) * time.Second
}

// verifier returns the upstream verifier of tenant's configuration,
// building it when the configuration is new or changed.
func (x *authExtras) verifier(tenant string, cfg OIDCConfig) (*auth.OIDCVerifier, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if c, ok := x.verifiers[tenant]; ok && c.cfg == cfg {
		return c.v, nil
	}
	v, err := auth.NewOIDCVerifier(auth.OIDCIssuer{Issuer: cfg.Issuer, Audience: cfg.Audience,
		JWKSURL: cfg.JWKSURL, JWKSFile: cfg.JWKSFile}, x.oidcOpts)
	if err != nil {
		return nil, err
	}
	if len(x.verifiers) >= maxVerifierCache {
		clear(x.verifiers) // rare: rebuilding costs one JWKS load each
	}
	x.verifiers[tenant] = cachedVerifier{cfg: cfg, v: v}
	return v, nil
}

// validateOIDCConfig checks a configuration and fills its defaults.
func validateOIDCConfig(c *OIDCConfig) error {
	var p problems
	if c.PrincipalClaim == "" {
		c.PrincipalClaim = defaultPrincipalClaim
	}
	for _, f := range []struct{ name, v string }{{"issuer", c.Issuer}, {"audience", c.Audience},
		{"jwks_url", c.JWKSURL}, {"jwks_file", c.JWKSFile}, {"principal_claim", c.PrincipalClaim}} {
		if len(f.v) > maxOIDCFieldLen {
			p.add(f.name, "%d characters is too long (at most %d)", len(f.v), maxOIDCFieldLen)
		}
	}
	if c.Issuer == "" {
		p.add("issuer", "required")
	}
	if c.Audience == "" {
		p.add("audience", "required")
	}
	switch {
	case (c.JWKSURL == "") == (c.JWKSFile == ""):
		p.add("jwks_url", "give exactly one of jwks_url and jwks_file")
	case c.JWKSURL != "":
		if u, err := url.Parse(c.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.add("jwks_url", "%q is not an http(s) URL", c.JWKSURL)
		}
	}
	return p.err()
}

// tenantOIDC reads tenant's configuration: not_found when the tenant is
// missing or has none.
func (s *Service) tenantOIDC(ctx context.Context, tenant string) (OIDCConfig, error) {
	if err := s.mustTenant(ctx, tenant); err != nil {
		return OIDCConfig{}, err
	}
	raw, ok, err := s.store.Meta(ctx, metaOIDCPrefix+tenant)
	if err != nil {
		return OIDCConfig{}, err
	}
	if !ok || len(raw) == 0 {
		return OIDCConfig{}, &wire.Error{Code: wire.CodeNotFound, Retry: wire.RetryFatal,
			Message: fmt.Sprintf("tenant %q has no OIDC issuer configured (PUT /v1/tenants/%s/oidc)", tenant, tenant)}
	}
	var c OIDCConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return OIDCConfig{}, fmt.Errorf("stored OIDC config of tenant %q: %w", tenant, err)
	}
	return c, nil
}

func (s *Service) putOIDC(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	var c OIDCConfig
	if err := decodeBody(r, &c); err != nil {
		return 0, nil, err
	}
	if err := validateOIDCConfig(&c); err != nil {
		return 0, nil, err
	}
	if err := s.mustTenant(r.Context(), n[0]); err != nil {
		return 0, nil, err
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return 0, nil, err
	}
	if err := s.store.PutMeta(r.Context(), metaOIDCPrefix+n[0], raw); err != nil {
		return 0, nil, err
	}
	s.log.Info("set a tenant's OIDC issuer", "tenant", n[0], "issuer", c.Issuer)
	return http.StatusOK, c, nil
}

func (s *Service) getOIDC(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	c, err := s.tenantOIDC(r.Context(), n[0])
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, c, nil
}

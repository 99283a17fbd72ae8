package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// exchangeRequest is the body of POST .../token/exchange. The upstream
// token may instead come as "Authorization: Bearer"; absent actions or
// resources mean everything the principal's roles grant.
type exchangeRequest struct {
	OIDCToken  string   `json:"oidc_token,omitempty"`
	Actions    []string `json:"actions,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	TTLSeconds *int64   `json:"ttl_seconds,omitempty"`
}

// exchangeResponse answers an exchange or a refresh.
type exchangeResponse struct {
	Token            string   `json:"token"`
	ExpiresAt        string   `json:"expires_at"` // RFC 3339, UTC
	RefreshToken     string   `json:"refresh_token"`
	RefreshExpiresAt string   `json:"refresh_expires_at"` // RFC 3339, UTC
	Subject          string   `json:"subject"`
	Permissions      []string `json:"permissions"`
}

func (s *Service) exchangeToken(r *http.Request, _ *auth.Identity) (int, any, error) {
	status, body, err := s.exchange(r)
	countResult("felix_controlplane_token_exchanges_total", err)
	return status, body, err
}

func (s *Service) exchange(r *http.Request) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	var req exchangeRequest
	if r.ContentLength != 0 {
		if err := decodeBody(r, &req); err != nil {
			return 0, nil, err
		}
	}
	if req.OIDCToken == "" && r.Header.Get("Authorization") != "" {
		if req.OIDCToken, err = bearerToken(r); err != nil {
			return 0, nil, unauthorizedErr("malformed Authorization header: want Bearer <OIDC token>")
		}
	}
	ttl, err := validateNarrowing(req.Actions, req.Resources, req.TTLSeconds)
	if err != nil {
		return 0, nil, err
	}
	if req.OIDCToken == "" {
		return 0, nil, unauthorizedErr("missing OIDC token: send oidc_token in the body or Authorization: Bearer <OIDC token>")
	}
	ctx := r.Context()
	principal, err := s.verifyUpstream(ctx, n[0], req.OIDCToken)
	if err != nil {
		return 0, nil, err
	}
	perms, err := s.tokenPerms(ctx, n[0], principal, req.Actions, req.Resources)
	if err != nil {
		return 0, nil, err
	}
	now := s.now()
	rec := chainRecord{Tenant: n[0], Principal: principal, Actions: req.Actions, Resources: req.Resources,
		TTLSeconds: ttl, ExpiresAt: now.Add(s.x.refreshTTL).Unix()}
	refresh, err := s.startChain(ctx, &rec, now)
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.issue(ctx, rec, perms, refresh)
	if err != nil {
		return 0, nil, err
	}
	s.log.Info("exchanged an OIDC token", "tenant", n[0], "subject", principal, "perms", len(perms))
	return http.StatusOK, resp, nil
}

// validateNarrowing checks the narrowing and ttl of an exchange and
// returns the access token TTL in seconds.
func validateNarrowing(actions, resources []string, ttl *int64) (int64, error) {
	var p problems
	for _, f := range []struct {
		name string
		v    []string
	}{{"actions", actions}, {"resources", resources}} {
		if len(f.v) > maxPerms {
			p.add(f.name, "%d entries is too many (at most %d)", len(f.v), maxPerms)
		}
		for i, v := range f.v {
			if v == "" || len(v) > maxOIDCFieldLen {
				p.add(fmt.Sprintf("%s[%d]", f.name, i), "must be 1 to %d characters", maxOIDCFieldLen)
			}
		}
	}
	out := int64(defaultExchangeTokenTTL)
	if ttl != nil {
		if *ttl < 1 || *ttl > maxExchangeTokenTTL {
			p.add("ttl_seconds", "%d is out of range 1..%d (one day)", *ttl, maxExchangeTokenTTL)
		}
		out = *ttl
	}
	return out, p.err()
}

// verifyUpstream checks an upstream token against tenant's issuer and
// returns the principal it names.
func (s *Service) verifyUpstream(ctx context.Context, tenant, token string) (string, error) {
	cfg, err := s.tenantOIDC(ctx, tenant)
	if err != nil {
		return "", err
	}
	v, err := s.x.verifier(tenant, cfg)
	if err != nil {
		return "", fmt.Errorf("OIDC verifier of tenant %q: %w", tenant, err)
	}
	id, err := v.Verify(ctx, token)
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			return "", unauthorizedErr("OIDC token refused: " + we.Message)
		}
		return "", unauthorizedErr("OIDC token refused: " + err.Error())
	}
	claim := cfg.PrincipalClaim
	if claim == "" || claim == defaultPrincipalClaim {
		return id.Subject, nil
	}
	principal, _ := id.Claims[claim].(string)
	if principal == "" || len(principal) > maxSubjectLen {
		return "", unauthorizedErr(fmt.Sprintf("OIDC token refused: claim %q (the tenant's principal claim) is missing, not a string, or longer than %d", claim, maxSubjectLen))
	}
	return principal, nil
}

// tokenPerms computes a principal's token permissions: what its roles
// grant, narrowed by actions × resources (absent means everything).
func (s *Service) tokenPerms(ctx context.Context, tenant, principal string, actions, resources []string) ([]string, error) {
	granted, err := s.grants(ctx, tenant, principal)
	if err != nil {
		return nil, err
	}
	if len(granted) == 0 {
		return nil, forbiddenErr("principal %q has no roles granting permissions in tenant %q", principal, tenant)
	}
	if len(actions) == 0 && len(resources) == 0 {
		return granted, nil
	}
	if len(actions) == 0 {
		actions = []string{"*"}
	}
	if len(resources) == 0 {
		resources = []string{"*"}
	}
	perms := auth.Narrow(granted, actions, resources)
	if len(perms) == 0 {
		return nil, forbiddenErr("the requested actions and resources lie outside what principal %q is granted in tenant %q", principal, tenant)
	}
	return perms, nil
}

// issue mints the access token for a chain's principal and builds the
// answer.
func (s *Service) issue(ctx context.Context, rec chainRecord, perms []string, refresh string) (exchangeResponse, error) {
	iat, err := s.issuedAt(ctx, rec.Tenant, rec.Principal)
	if err != nil {
		return exchangeResponse{}, err
	}
	now := s.now()
	exp := now.Add(time.Duration(rec.TTLSeconds) * time.Second).Truncate(time.Second)
	tok, err := s.MintToken(auth.Claims{Subject: rec.Principal, TenantID: rec.Tenant, Perms: perms,
		IssuedAt: iat, NotBefore: now, Expiry: exp})
	if err != nil {
		return exchangeResponse{}, err
	}
	return exchangeResponse{
		Token:            tok,
		ExpiresAt:        exp.UTC().Format(time.RFC3339),
		RefreshToken:     refresh,
		RefreshExpiresAt: time.Unix(rec.ExpiresAt, 0).UTC().Format(time.RFC3339),
		Subject:          rec.Principal,
		Permissions:      perms,
	}, nil
}

// countResult counts one exchange or refresh by its outcome: ok, or the
// error's code (replay for a reused refresh token).
func countResult(metric string, err error) {
	result := "ok"
	var we *wire.Error
	switch {
	case err == nil:
	case errors.Is(err, errReplay):
		result = "replay"
	case errors.Is(err, ErrNotFound):
		result = string(wire.CodeNotFound)
	case errors.As(err, &we):
		result = string(we.Code)
	default:
		result = "error"
	}
	metrics.GetOrCreateCounter(fmt.Sprintf(`%s{result=%q}`, metric, result)).Inc()
}

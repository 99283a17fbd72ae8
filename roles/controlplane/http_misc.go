package controlplane

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// tokenResponse is the body answering a token mint.
type tokenResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"` // RFC 3339, UTC
}

func (s *Service) createToken(r *http.Request, id *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	var req tokenRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if _, err := validateTokenRequest(req); err != nil {
		return 0, nil, err
	}
	if p, ok := mayGrant(id.Perms, req.Perms); !ok {
		return 0, nil, forbiddenErr("perms: cannot grant %q, which the calling token does not hold", p)
	}
	if err := s.mustTenant(r.Context(), n[0]); err != nil {
		return 0, nil, err
	}
	ttl := int64(defaultTokenTTL)
	if req.TTLSeconds != nil {
		ttl = *req.TTLSeconds
	}
	now := s.now()
	exp := now.Add(time.Duration(ttl) * time.Second).Truncate(time.Second)
	tok, err := s.MintToken(auth.Claims{Subject: req.Subject, TenantID: n[0], Perms: req.Perms, IssuedAt: now, Expiry: exp})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, tokenResponse{Token: tok, ExpiresAt: exp.UTC().Format(time.RFC3339)}, nil
}

func (s *Service) getSnapshot(r *http.Request, _ *auth.Identity) (int, any, error) {
	page, err := s.Snapshot(r.Context(), wire.CatalogKind(r.PathValue("kind")))
	return http.StatusOK, page, err
}

func (s *Service) getChanges(r *http.Request, _ *auth.Identity) (int, any, error) {
	kind := wire.CatalogKind(r.PathValue("kind"))
	if !feedKind(kind) {
		return 0, nil, unknownKind(kind)
	}
	q := r.URL.Query()
	var p problems
	since, limit := uint64(0), DefaultChangesLimit
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			p.add("since", "%q is not a non-negative integer", v)
		}
		since = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxChangesLimit {
			p.add("limit", "%q is not an integer in 1..%d", v, MaxChangesLimit)
		}
		limit = n
	}
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	page, err := s.stamped(r.Context())(s.store.Changes(r.Context(), kind, since, limit))
	return http.StatusOK, page, err
}

func (s *Service) getJWKS(r *http.Request, _ *auth.Identity) (int, any, error) {
	b, err := s.JWKS(r.Context())
	return http.StatusOK, json.RawMessage(b), err
}

// statusBody answers /live and /ready, in the shape the broker's
// /live and /ready answer too (docs/operations.md): status is ok (/live),
// ready, or not_ready with a reason (503).
type statusBody struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func (s *Service) getLive(*http.Request, *auth.Identity) (int, any, error) {
	return http.StatusOK, statusBody{Status: "ok"}, nil
}

func (s *Service) getReady(r *http.Request, _ *auth.Identity) (int, any, error) {
	if !s.store.Ready() {
		return http.StatusServiceUnavailable, statusBody{Status: "not_ready",
			Reason: "no quorum: this control plane member cannot reach a quorum of its Raft group"}, nil
	}
	return http.StatusOK, statusBody{Status: "ready"}, nil
}

func (s *Service) getOpenAPI(*http.Request, *auth.Identity) (int, any, error) {
	b, err := s.openAPI()
	return http.StatusOK, json.RawMessage(b), err
}

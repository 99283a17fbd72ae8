package controlplane

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

func unauthorizedErr(msg string) *wire.Error {
	return &wire.Error{Code: wire.CodeUnauthorized, Retry: wire.RetryFatal, Message: msg}
}

func forbiddenErr(format string, args ...any) error {
	return &wire.Error{Code: wire.CodeForbidden, Retry: wire.RetryFatal, Message: fmt.Sprintf(format, args...)}
}

// authorize verifies the request's bearer token and checks it against the
// route's scope. A token with cluster.manage on "cluster" passes every
// scope for any tenant; otherwise tenant routes need a token of the path's
// tenant holding the route's action on tenant:{tenant}.
func (s *Service) authorize(r *http.Request, sc scope) (*auth.Identity, error) {
	token, err := bearerToken(r)
	if err != nil {
		return nil, err
	}
	tid, err := peekTenant(token)
	if err != nil {
		return nil, err
	}
	id, err := s.verifier.Verify(r.Context(), token, tid)
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			return nil, err
		}
		return nil, unauthorizedErr(err.Error())
	}
	clusterAdmin := id.Perms.Allows(auth.ActionClusterManage, auth.ClusterResource)
	if sc == scopeCluster {
		if !clusterAdmin {
			return nil, forbiddenErr("token lacks %s on %q", auth.ActionClusterManage, auth.ClusterResource)
		}
		return id, nil
	}
	if clusterAdmin {
		return id, nil
	}
	tenant := r.PathValue("tenant")
	if id.TenantID != tenant {
		return nil, unauthorizedErr(fmt.Sprintf("tenant mismatch: token is for tenant %q, not %q", id.TenantID, tenant)).
			WithDetail(wire.DetailReason, wire.ReasonTenantMismatch)
	}
	action := auth.ActionTenantManage
	if sc == scopeToken {
		action = auth.ActionTokenCreate
	}
	if sc == scopeRead && !id.Perms.Allows(action, auth.TenantResource(tenant)) {
		read, resource := readResource(r)
		if !id.Perms.Allows(read, resource) {
			return nil, forbiddenErr("token lacks %s on %q (or %s on %q)", read, resource, action, auth.TenantResource(tenant))
		}
		return id, nil
	}
	if !id.Perms.Allows(action, auth.TenantResource(tenant)) {
		return nil, forbiddenErr("token lacks %s on %q", action, auth.TenantResource(tenant))
	}
	return id, nil
}

// bearerToken reads "Authorization: Bearer <token>".
func bearerToken(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", unauthorizedErr("missing token: send Authorization: Bearer <Felix token>")
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", unauthorizedErr("malformed Authorization header: want Bearer <Felix token>")
	}
	return strings.TrimSpace(token), nil
}

// peekTenant reads the tid claim without checking the signature, so the
// token can then be verified for its own tenant. Nothing read here is
// trusted before Verify succeeds.
func peekTenant(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", unauthorizedErr("malformed token")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", unauthorizedErr("malformed token")
	}
	var c struct {
		TenantID string `json:"tid"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.TenantID == "" {
		return "", unauthorizedErr("malformed token")
	}
	return c.TenantID, nil
}

// mayGrant reports the first of perms the caller could not itself use,
// so a token can only mint tokens no stronger than itself. Each requested
// permission is tested literally against the caller's patterns: a caller
// pattern's '*' covers any requested text, including a requested '*'.
func mayGrant(caller *auth.Matcher, perms []string) (string, bool) {
	for _, p := range perms {
		action, resource, _ := strings.Cut(p, ":")
		if !caller.Allows(auth.Action(action), resource) {
			return p, false
		}
	}
	return "", true
}

package controlplane

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// policyRequest is the body of PUT .../policies/{role}.
type policyRequest struct {
	Permissions []string `json:"permissions"`
}

func validatePerms(field string, perms []string, p *problems) {
	switch {
	case len(perms) == 0:
		p.add(field, "at least one permission is required")
	case len(perms) > maxPerms:
		p.add(field, "%d entries is too many (at most %d)", len(perms), maxPerms)
	default:
		if _, err := auth.CompilePerms(perms); err != nil {
			p.add(field, "%v", err)
		} else if err := auth.CheckActions(perms); err != nil {
			p.add(field, "%v", err)
		}
	}
}

func (s *Service) putPolicy(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "role")
	if err != nil {
		return 0, nil, err
	}
	var req policyRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	var p problems
	validatePerms("permissions", req.Permissions, &p)
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	if err := s.mustTenant(ctx, n[0]); err != nil {
		return 0, nil, err
	}
	pol := Policy{Tenant: n[0], Role: n[1], Permissions: dedupe(req.Permissions)}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had, err := s.policy(ctx, n[0], n[1])
	if err != nil {
		return 0, nil, err
	}
	if err := s.store.PutPolicy(ctx, pol); err != nil {
		return 0, nil, err
	}
	if had && narrows(old.Permissions, pol.Permissions) {
		if err := s.revokeRole(ctx, n[0], n[1], "role "+n[1]+" changed"); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, pol, nil
}

func (s *Service) deletePolicy(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "role")
	if err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.store.DeletePolicy(ctx, n[0], n[1]); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.revokeRole(ctx, n[0], n[1], "role "+n[1]+" deleted")
}

func (s *Service) listPolicies(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	if err := s.mustTenant(r.Context(), n[0]); err != nil {
		return 0, nil, err
	}
	items, err := s.store.Policies(r.Context(), n[0])
	return http.StatusOK, listBody[Policy]{Items: nonNil(items)}, err
}

// principalPath reads and checks the named path segments and the
// {principal} one.
func principalPath(r *http.Request, names ...string) ([]string, string, error) {
	n, err := pathNames(r, names...)
	if err != nil {
		return nil, "", err
	}
	var p problems
	v := r.PathValue("principal")
	p.subject("principal (path)", v)
	return n, v, p.err()
}

func (s *Service) putAssignment(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, principal, err := principalPath(r, "tenant", "role")
	if err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	if _, ok, err := s.policy(ctx, n[0], n[1]); err != nil {
		return 0, nil, err
	} else if !ok {
		return 0, nil, notFound("role " + n[1] + " of tenant " + n[0] + " does not exist; create it with PUT /v1/tenants/" + n[0] + "/policies/" + n[1])
	}
	a := Assignment{Tenant: n[0], Principal: principal, Role: n[1]}
	if err := s.store.PutAssignment(ctx, a); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, a, nil
}

func (s *Service) deleteAssignment(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, principal, err := principalPath(r, "tenant", "role")
	if err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	if err := s.store.DeleteAssignment(ctx, n[0], principal, n[1]); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.revokePrincipal(ctx, n[0], principal, "role "+n[1]+" unassigned")
}

// deletePrincipal takes every role from a principal and revokes its tokens.
func (s *Service) deletePrincipal(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, principal, err := principalPath(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	if err := s.mustTenant(ctx, n[0]); err != nil {
		return 0, nil, err
	}
	all, err := s.store.Assignments(ctx, n[0])
	if err != nil {
		return 0, nil, err
	}
	for _, a := range all {
		if a.Principal != principal {
			continue
		}
		if err := s.store.DeleteAssignment(ctx, a.Tenant, a.Principal, a.Role); err != nil && !isNotFound(err) {
			return 0, nil, err
		}
	}
	return http.StatusNoContent, nil, s.revokePrincipal(ctx, n[0], principal, "principal removed")
}

func (s *Service) listAssignments(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	if err := s.mustTenant(r.Context(), n[0]); err != nil {
		return 0, nil, err
	}
	items, err := s.store.Assignments(r.Context(), n[0])
	if err != nil {
		return 0, nil, err
	}
	if want := r.URL.Query().Get("principal"); want != "" {
		items = slices.DeleteFunc(items, func(a Assignment) bool { return a.Principal != want })
	}
	return http.StatusOK, listBody[Assignment]{Items: nonNil(items)}, nil
}

// policy reads one role.
func (s *Service) policy(ctx context.Context, tenant, role string) (Policy, bool, error) {
	all, err := s.store.Policies(ctx, tenant)
	if err != nil {
		return Policy{}, false, err
	}
	for _, p := range all {
		if p.Role == role {
			return p, true, nil
		}
	}
	return Policy{}, false, nil
}

// grants is the union of the permissions of every role assigned to
// principal in tenant, without duplicates, in role order.
func (s *Service) grants(ctx context.Context, tenant, principal string) ([]string, error) {
	assigned, err := s.store.Assignments(ctx, tenant)
	if err != nil {
		return nil, err
	}
	roles := map[string]bool{}
	for _, a := range assigned {
		if a.Principal == principal {
			roles[a.Role] = true
		}
	}
	if len(roles) == 0 {
		return nil, nil
	}
	pols, err := s.store.Policies(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pols {
		if roles[p.Role] {
			out = append(out, p.Permissions...)
		}
	}
	return dedupe(out), nil
}

// revokeRole revokes every principal assigned role in tenant.
func (s *Service) revokeRole(ctx context.Context, tenant, role, reason string) error {
	assigned, err := s.store.Assignments(ctx, tenant)
	if err != nil {
		return err
	}
	for _, a := range assigned {
		if a.Role == role {
			if err := s.revokePrincipal(ctx, tenant, a.Principal, reason); err != nil {
				return err
			}
		}
	}
	return nil
}

// revokePrincipal withdraws every token of principal issued up to and
// including the current second: brokers end its open streams, and
// tokens minted from now on (see issuedAt) work again.
func (s *Service) revokePrincipal(ctx context.Context, tenant, principal, reason string) error {
	rev := wire.Revocation{TenantID: tenant, Subject: principal, RevokedBefore: s.now().Unix() + 1, Reason: reason}
	if len(rev.Reason) > maxReasonLen {
		rev.Reason = rev.Reason[:maxReasonLen]
	}
	if err := s.store.PutRevocation(ctx, rev); err != nil {
		return err
	}
	s.log.Info("revoked a principal's tokens", "tenant", tenant, "subject", principal, "reason", reason)
	return nil
}

// issuedAt is the iat for a new token of principal: now, or the end of
// the principal's latest revocation when that lies ahead (at most a
// second), so the new token is not caught by it.
func (s *Service) issuedAt(ctx context.Context, tenant, principal string) (time.Time, error) {
	now := s.now()
	revs, err := s.store.Revocations(ctx, tenant)
	if err != nil {
		return now, err
	}
	for _, r := range revs {
		if r.Subject == principal && r.RevokedBefore > now.Unix() {
			return time.Unix(r.RevokedBefore, 0), nil
		}
	}
	return now, nil
}

// narrows reports whether some permission of old is missing from now.
func narrows(old, now []string) bool {
	for _, p := range old {
		if !slices.Contains(now, p) {
			return true
		}
	}
	return false
}

func dedupe(in []string) []string {
	out := make([]string, 0, len(in))
	seen := map[string]bool{}
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

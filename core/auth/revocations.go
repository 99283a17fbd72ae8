package auth

import (
	"sync"

	"github.com/felixmq/felix/wire"
)

// Principal names one subject of one tenant.
type Principal struct {
	TenantID string
	Subject  string
}

// Revocations is the set of revoked principals a broker (or the control
// plane) refuses tokens of. A revocation withdraws the tokens of its
// principal issued before its RevokedBefore; a later token works. It is
// safe for concurrent use, and a nil *Revocations revokes nothing.
type Revocations struct {
	mu sync.RWMutex
	m  map[Principal]wire.Revocation
}

// NewRevocations returns an empty set.
func NewRevocations() *Revocations {
	return &Revocations{m: map[Principal]wire.Revocation{}}
}

// Set records r, replacing an earlier revocation of the same principal.
func (rs *Revocations) Set(r wire.Revocation) {
	rs.mu.Lock()
	rs.m[Principal{TenantID: r.TenantID, Subject: r.Subject}] = r
	rs.mu.Unlock()
}

// Delete lifts the revocation of tenant's subject, if any.
func (rs *Revocations) Delete(tenant, subject string) {
	rs.mu.Lock()
	delete(rs.m, Principal{TenantID: tenant, Subject: subject})
	rs.mu.Unlock()
}

// Len is the number of revoked principals.
func (rs *Revocations) Len() int {
	if rs == nil {
		return 0
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	return len(rs.m)
}

// Revoked returns the revocation that covers id: same tenant and subject,
// and a token issued before RevokedBefore (a token without iat counts as
// issued at the epoch).
func (rs *Revocations) Revoked(id *Identity) (wire.Revocation, bool) {
	if rs == nil || id == nil {
		return wire.Revocation{}, false
	}
	rs.mu.RLock()
	r, ok := rs.m[Principal{TenantID: id.TenantID, Subject: id.Subject}]
	rs.mu.RUnlock()
	if !ok || !Covers(r, id) {
		return wire.Revocation{}, false
	}
	return r, true
}

// Covers reports whether r withdraws the token id was verified from.
func Covers(r wire.Revocation, id *Identity) bool {
	if r.TenantID != id.TenantID || r.Subject != id.Subject {
		return false
	}
	if id.IssuedAt.IsZero() {
		return true
	}
	return id.IssuedAt.Unix() < r.RevokedBefore
}

// Check returns the refusal for a revoked id, or nil.
func (rs *Revocations) Check(id *Identity) *wire.Error {
	r, ok := rs.Revoked(id)
	if !ok {
		return nil
	}
	return RevokedError(r)
}

// RevokedError is the refusal of a token r covers: code revoked, retry
// class fatal, naming the subject.
func RevokedError(r wire.Revocation) *wire.Error {
	e := &wire.Error{Code: wire.CodeRevoked, Retry: wire.RetryFatal,
		Message: "token revoked for subject " + r.Subject}
	if r.Reason != "" {
		e = e.WithDetail("reason", r.Reason)
	}
	return e.WithDetail("revoked_before", r.RevokedBefore)
}

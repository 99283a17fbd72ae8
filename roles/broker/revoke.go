package broker

import (
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// liveEntry is one open stream (a control or ingress stream, or a
// subscription's event stream) and the identity it acts as. kick ends the
// stream with an error; it must not block, and only its first call
// counts.
type liveEntry struct {
	id   *auth.Identity
	kick func(*wire.Error)
	once sync.Once
}

func (e *liveEntry) end(err *wire.Error) bool {
	ended := false
	e.once.Do(func() {
		ended = true
		e.kick(err)
	})
	return ended
}

// streamRegistry indexes the broker's open streams by principal, so a
// revocation finds the streams it ends without walking every connection,
// and the expiry sweep can end streams whose token ran out.
type streamRegistry struct {
	revs    *auth.Revocations
	revoked *metrics.Counter // the broker's count of streams ended by a revocation

	mu    sync.Mutex
	byWho map[auth.Principal]map[*liveEntry]struct{}
}

func newStreamRegistry(revs *auth.Revocations, revoked *metrics.Counter) *streamRegistry {
	return &streamRegistry{revs: revs, revoked: revoked, byWho: map[auth.Principal]map[*liveEntry]struct{}{}}
}

// add registers a stream acting as id and returns the function that
// forgets it. A revocation recorded before add returns still reaches the
// stream: add checks the revocation set after registering, and the
// catalog records a revocation before walking the registry.
func (r *streamRegistry) add(id *auth.Identity, kick func(*wire.Error)) (remove func()) {
	e := &liveEntry{id: id, kick: kick}
	who := auth.Principal{TenantID: id.TenantID, Subject: id.Subject}
	r.mu.Lock()
	set := r.byWho[who]
	if set == nil {
		set = map[*liveEntry]struct{}{}
		r.byWho[who] = set
	}
	set[e] = struct{}{}
	r.mu.Unlock()
	if rev, ok := r.revs.Revoked(id); ok && e.end(auth.RevokedError(rev)) {
		r.revoked.Inc()
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if set := r.byWho[who]; set != nil {
			delete(set, e)
			if len(set) == 0 {
				delete(r.byWho, who)
			}
		}
	}
}

// revoke ends every registered stream rev covers and returns how many.
func (r *streamRegistry) revoke(rev wire.Revocation) int {
	r.mu.Lock()
	var hit []*liveEntry
	for e := range r.byWho[auth.Principal{TenantID: rev.TenantID, Subject: rev.Subject}] {
		if auth.Covers(rev, e.id) {
			hit = append(hit, e)
		}
	}
	r.mu.Unlock()
	return endAll(hit, auth.RevokedError(rev), r.revoked.Inc)
}

// endAll kicks entries outside the registry's lock, counting each stream
// it ended.
func endAll(entries []*liveEntry, err *wire.Error, count func()) int {
	n := 0
	for _, e := range entries {
		if e.end(err) {
			count()
			n++
		}
	}
	return n
}

// size is the number of registered streams.
func (r *streamRegistry) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, set := range r.byWho {
		n += len(set)
	}
	return n
}

// ApplyRevocation records a revocation from the catalog and ends the
// streams it covers.
func (c *catalogState) ApplyRevocation(rev wire.Revocation) {
	c.revs.Set(rev)
	if n := c.streams.revoke(rev); n > 0 {
		c.log.Info("ended the streams of a revoked principal", "tenant", rev.TenantID, "subject", rev.Subject, "streams", n)
	}
}

// RemoveRevocation lifts a revocation.
func (c *catalogState) RemoveRevocation(tenant, subject string) {
	c.revs.Delete(tenant, subject)
}

package broker

import (
	"context"
	"sync"
	"time"
)

// Read-your-writes for names the control plane has just acknowledged.
//
// The broker learns the catalog by polling it (CatalogSyncInterval), so a
// stream, cache or namespace created a moment ago may not be known yet
// when its creator's first publish, subscribe or cache request arrives.
// Rather than refuse with not_found and let the client guess how long to
// wait, a broker that misses a name asks the catalog once, at once, before
// it answers: an on-demand pass of the kinds the name needs (see
// catalogsync.Syncer.SyncKinds). We chose this over making `admin ...
// create` wait for a broker because it holds for every client and every
// broker the client reaches, not only the broker beside the control plane
// that served the create; the price is one bounded wait on a miss.
//
// A flood of requests for names that do not exist must not become a
// flood of catalog reads, so the lookups of one kind are coalesced and
// rate-bounded:
//
//   - a miss is answered by a pass that started after it (a pass already
//     running may predate the create it is looking for), and every miss
//     waiting meanwhile shares that pass;
//   - passes of one kind start at most once per lookupMinGap;
//   - a miss waits at most lookupWait (the pass is cancelled with it), and
//     the answer is then not_found as before.

// lookupMinGap is the least time between the starts of two on-demand
// passes of one kind.
const lookupMinGap = 100 * time.Millisecond

// lookupWait bounds how long a miss waits for its on-demand pass.
const lookupWait = 2 * time.Second

// catalogLookup coalesces and paces the on-demand passes of one kind.
type catalogLookup struct {
	// pass runs one on-demand pass; it must return when ctx ends.
	pass   func(ctx context.Context) error
	minGap time.Duration
	wait   time.Duration

	mu sync.Mutex
	// done counts the passes finished. Invariant: done only grows.
	done uint64
	// running is true while a caller runs a pass; doneC is closed when it
	// finishes (nil when none runs).
	running bool
	doneC   chan struct{}
	// nextStart is the earliest time the next pass may start.
	nextStart time.Time
	// lastOK says the pass that finished last read every kind it asked.
	lastOK bool
}

func newCatalogLookup(pass func(context.Context) error) *catalogLookup {
	return &catalogLookup{pass: pass, minGap: lookupMinGap, wait: lookupWait}
}

// refresh returns once a pass that started after the call has finished,
// reporting whether it read the catalog without a failure; false also
// when ctx ends or the wait runs out first. The caller that finds no pass
// running and the gap elapsed runs the pass itself; the others wait for
// it.
func (l *catalogLookup) refresh(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	l.mu.Lock()
	need := l.done + 1
	if l.running {
		need++ // the running pass may have started before what we look for
	}
	for l.done < need {
		if !l.running {
			if d := time.Until(l.nextStart); d > 0 {
				l.mu.Unlock()
				if !sleepCtx(ctx, d) {
					return false
				}
				l.mu.Lock()
				continue
			}
			l.runLocked(ctx)
			if ctx.Err() != nil {
				l.mu.Unlock()
				return false // the pass was cut short
			}
			continue
		}
		doneC := l.doneC
		l.mu.Unlock()
		select {
		case <-doneC:
		case <-ctx.Done():
			return false
		}
		l.mu.Lock()
	}
	ok := l.lastOK
	l.mu.Unlock()
	return ok
}

// runLocked runs one pass with l.mu released during it, and wakes the
// waiters. Called and returns with l.mu held.
func (l *catalogLookup) runLocked(ctx context.Context) {
	l.running, l.doneC = true, make(chan struct{})
	l.nextStart = time.Now().Add(l.minGap)
	l.mu.Unlock()
	// A failed pass is not retried here: the miss is answered not_found
	// (without the reason that says the catalog lacks the name), and the
	// periodic loop reports the failure.
	err := l.pass(ctx)
	l.mu.Lock()
	l.lastOK = err == nil
	l.running = false
	l.done++
	close(l.doneC)
	l.doneC = nil
}

// sleepCtx waits d, or less when ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

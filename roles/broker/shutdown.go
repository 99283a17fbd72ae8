package broker

import (
	"context"
	"sync"
	"time"
)

// defaultDrainBudget is the drain budget when Shutdown's context has no
// deadline.
const defaultDrainBudget = 10 * time.Second

// Shutdown drains the broker within ctx's deadline: readiness turns false;
// a cluster member first hands the durable shards it leads to caught-up
// followers while it still serves (HandOff, within Config.HandoffTimeout;
// the drain's budget, ctx's, is counted from the end of it); then the
// listener stops accepting, each connection stops accepting streams
// and gets half the remaining budget for its streams to finish, then stops
// reading, answers what it already read, lets its subscriptions write what
// is queued for them (for half of what is left), and is closed with
// wire.CloseShutdown.
// Then the catalog sync and the sweeper stop, the scheduler runs what it
// queued, every publish still fanning out finishes, and the core (with its
// logs) is closed.
//
// The budget is kept even when the disk hangs: when ctx ends, the broker's
// work context is cancelled, so a publish still waiting on an fsync gives
// up and is answered draining with retry class outcome_unknown (never
// acknowledged); past the budget, shutdown waits at most abandonGrace in
// all for those answers and for the core to close, then logs what it
// abandoned and returns. The result is ctx's error when the budget ran
// out. Every goroutine the server started has ended when Shutdown
// returns, except a core close that was abandoned (it ends when the disk
// answers).
// Calling it again returns the first result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() {
		s.drainingF.Store(true)
		if d, ok := ctx.Deadline(); ok && s.handsOff() {
			budget := time.Until(d)
			s.HandOff(context.WithoutCancel(ctx))
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), budget)
			defer cancel()
		}
		s.shutErr = s.shutdown(ctx)
	})
	return s.shutErr
}

// abandonGrace is how long past its budget a shutdown still waits, in
// all, for the answers to the publishes it cancelled and for the core to
// close.
const abandonGrace = time.Second

func (s *Server) shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultDrainBudget)
		defer cancel()
	}
	stopWork := context.AfterFunc(ctx, s.workCancel)
	defer stopWork()
	deadline, _ := ctx.Deadline()
	late, cancelLate := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(abandonGrace))
	defer cancelLate()
	s.drainingF.Store(true)
	s.HandOff(ctx) // once: done already when ctx had a deadline
	s.mu.Lock()
	s.draining = true
	started := s.started
	s.mu.Unlock()
	if !started {
		s.bgCancel()
		s.workCancel()
		s.closeCore(late)
		return nil
	}
	closeAll(s.lns)
	s.acceptWG.Wait()
	s.drainConnections(ctx, late)
	s.connWG.Wait()
	s.bgCancel()
	// The peer links close with the background work: no majority can be
	// reached any more, so publishes still waiting for one are given up.
	s.repl.stopAll()
	s.bgWG.Wait()
	s.sched.Close()
	err := s.publishes.wait(ctx)
	s.workCancel()
	if !waitUntil(late, s.publishes.idleC()) {
		s.log.Error("shutdown abandoned publishes that did not settle past the budget", "budget_overrun", abandonGrace)
	}
	s.closeCore(late)
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// closeCore closes the core (and its logs) on a goroutine of its own and
// waits for it until late. A close held by a hung disk is abandoned and
// logged; coreClosed is closed whenever it ends.
func (s *Server) closeCore(late context.Context) {
	go func() {
		defer close(s.coreClosed)
		s.core.Close()
	}()
	if !waitUntil(late, s.coreClosed) {
		s.log.Error("shutdown abandoned closing the storage: a log flush did not return; records written since the last fsync may not be durable")
		return
	}
	// Every log is closed: the next start keeps the storage identity.
	if err := removeRunMarker(s.runMarker); err != nil {
		s.log.Warn("cannot remove the run marker; the next start counts this stop as a crash", "err", err)
	}
}

// waitUntil waits for c until late ends; it reports whether c closed.
func waitUntil(late context.Context, c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-late.Done():
		return false
	}
}

// drainConnections drains every connection at once under one budget.
func (s *Server) drainConnections(ctx, late context.Context) {
	deadline, _ := ctx.Deadline()
	graceCtx, cancel := context.WithTimeout(ctx, time.Until(deadline)/2)
	defer cancel()
	s.mu.Lock()
	conns := make([]*connection, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.drain(ctx, graceCtx, late)
		}()
	}
	wg.Wait()
}

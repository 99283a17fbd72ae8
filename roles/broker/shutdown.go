package broker

import (
	"context"
	"sync"
	"time"
)

// defaultDrainBudget is the drain budget when Shutdown's context has no
// deadline.
const defaultDrainBudget = 10 * time.Second

// Shutdown drains the broker within ctx's deadline: readiness turns false,
// the listener stops accepting, each connection stops accepting streams
// and gets half the remaining budget for its streams to finish, then stops
// reading, answers what it already read, lets its subscriptions write what
// is queued for them (for half of what is left), and is closed with
// wire.CloseShutdown.
// Then the catalog sync and the sweeper stop, the scheduler runs what it
// queued, and every publish still fanning out finishes (cancelled when the
// budget runs out). Every goroutine the server started has ended when
// Shutdown returns. The result is ctx's error when the budget ran out.
// Calling it again returns the first result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() { s.shutErr = s.shutdown(ctx) })
	return s.shutErr
}

func (s *Server) shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultDrainBudget)
		defer cancel()
	}
	s.drainingF.Store(true)
	s.mu.Lock()
	s.draining = true
	started := s.started
	s.mu.Unlock()
	if !started {
		s.bgCancel()
		s.workCancel()
		s.core.Close()
		return nil
	}
	s.ln.Close()
	<-s.acceptDone
	s.drainConnections(ctx)
	s.connWG.Wait()
	s.bgCancel()
	s.bgWG.Wait()
	s.sched.Close()
	err := s.publishes.wait(ctx)
	s.workCancel()
	<-s.publishes.idleC()
	s.core.Close()
	unregisterLiveServer(s)
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// drainConnections drains every connection at once under one budget.
func (s *Server) drainConnections(ctx context.Context) {
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
			c.drain(ctx, graceCtx)
		}()
	}
	wg.Wait()
}

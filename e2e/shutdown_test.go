package e2e

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// TestGracefulShutdownAnswersInflightPublishes keeps acked publishers busy
// while SIGTERM arrives: every publish call must come back (acknowledged,
// or refused with an error) rather than hang, and the
// process must exit cleanly (status 0) inside its drain budget.
func TestGracefulShutdownAnswersInflightPublishes(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "drain", "--policy", "block")
	tok := n.adminToken()

	sc := n.connect(ctx, tok)
	var sub *felix.Subscription
	eventually(t, 10*time.Second, "subscribe to the new stream", func() bool {
		s, err := sc.Subscribe(ctx, "default", "drain")
		sub = s
		return err == nil
	})
	received := make(map[string]bool)
	var recvMu sync.Mutex
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			recvMu.Lock()
			received[string(ev.Payload)] = true
			recvMu.Unlock()
		}
	}()

	pc := n.connect(ctx, tok)
	const workers = 8
	var acked atomic.Int64
	var mu sync.Mutex
	ackedPayloads := []string{}
	var wg sync.WaitGroup
	hung := make(chan string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				p := []byte{byte('a' + w), byte(i), byte(i >> 8), byte(i >> 16)}
				callCtx, callCancel := context.WithTimeout(ctx, 15*time.Second)
				err := pc.Publish(callCtx, "default", "drain", p, felix.AckPerMessage)
				callCancel()
				if errors.Is(err, context.DeadlineExceeded) {
					hung <- "publish hung during shutdown"
					return
				}
				if err != nil {
					return // refused or connection closed: answered
				}
				acked.Add(1)
				mu.Lock()
				ackedPayloads = append(ackedPayloads, string(p))
				mu.Unlock()
			}
		}(w)
	}
	eventually(t, 20*time.Second, "publishers to get going", func() bool { return acked.Load() > 200 })
	start := time.Now()
	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Errorf("felix serve exited with %v after SIGTERM; want a clean exit", err)
	}
	wg.Wait()
	close(hung)
	for h := range hung {
		t.Error(h)
	}
	t.Logf("%d publishes acknowledged; shutdown took %v", acked.Load(), time.Since(start))
	<-recvDone
	recvMu.Lock()
	defer recvMu.Unlock()
	missing := 0
	for _, p := range ackedPayloads {
		if !received[p] {
			missing++
		}
	}
	// In-memory streams acknowledge on enqueue, and the drain ends by
	// closing connections, which discards what a client had not yet read;
	// so delivery of every acknowledged publish is not promised. Report it.
	t.Logf("%d of %d acknowledged publishes had not been read by the subscriber when its connection closed", missing, len(ackedPayloads))
	for p := range received {
		if len(p) != 4 || p[0] < 'a' || p[0] >= 'a'+workers {
			t.Errorf("the subscriber received %q, which nobody published", p)
		}
	}
}

package bench

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// receivers is what the fixed-rate fan-out rigs (fanout, watch-fanout)
// share: the receiving connections, one reader per subscription or watch,
// and what the readers counted.
type receivers struct {
	clients    []*felix.Client
	deliveries atomic.Int64
	errs       atomic.Int64
	stopRecv   context.CancelFunc
	wg         sync.WaitGroup
}

// connect opens n receiving connections. After a failure the ones opened
// are left for close.
func (r *receivers) connect(ctx context.Context, t *target, n int) error {
	r.clients = make([]*felix.Client, n)
	for i := range r.clients {
		var err error
		if r.clients[i], err = t.connect(ctx); err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
	}
	return nil
}

// readEnded counts the error that ended a reader, unless ctx (the rig
// stopping) ended it.
func (r *receivers) readEnded(ctx context.Context) {
	if ctx.Err() == nil {
		r.errs.Add(1)
	}
}

// close stops the readers and closes every receiving connection and the
// sender's.
func (r *receivers) close(sender *felix.Client) {
	r.stopRecv()
	r.wg.Wait()
	for _, c := range append(r.clients, sender) {
		if c != nil {
			c.Close()
		}
	}
}

// settle waits until want deliveries arrived after the count stood at
// before, or deliveries stopped moving for 2 s.
func (r *receivers) settle(ctx context.Context, before, want int64) {
	settle(ctx, func() int64 { return r.deliveries.Load() - before }, want)
}

// settle waits until got reaches want or stops moving for 2 s.
func settle(ctx context.Context, got func() int64, want int64) {
	last, idleSince := got(), time.Now()
	for got() < want && time.Since(idleSince) < 2*time.Second && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if n := got(); n != last {
			last, idleSince = n, time.Now()
		}
	}
}

// paced calls send at rate for d, at most limit times (limit < 0: no
// bound), with each call's sequence number and intended send time, and
// returns how many calls it made and how far it fell behind its schedule.
// Stamping messages with due, not the time they went out, keeps a stalled
// sender from hiding its own delay (no coordinated omission).
func paced(ctx context.Context, rate int, d time.Duration, limit int, send func(seq int, due time.Time)) (sent int, lagMax time.Duration) {
	if limit < 0 {
		limit = math.MaxInt
	}
	interval := time.Second / time.Duration(max(1, rate))
	start := time.Now()
	for ctx.Err() == nil && sent < limit {
		due := start.Add(time.Duration(sent) * interval)
		if due.Sub(start) >= d {
			break
		}
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		} else {
			lagMax = max(lagMax, -wait)
		}
		send(sent, due)
		sent++
	}
	return sent, lagMax
}

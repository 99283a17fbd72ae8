package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// natsFanout is subscribers core subscriptions, one connection each, on one
// subject and a publisher connection that sends at fixed rates.
type natsFanout struct {
	n          *natsNode
	conns      []*nats.Conn
	pub        *nats.Conn
	subs       []*nats.Subscription
	deliveries atomic.Int64
	rec        *recorder
	payload    int
}

func newNATSFanout(ctx context.Context, n *natsNode, subscribers, payload int) (*natsFanout, error) {
	f := &natsFanout{n: n, rec: newRecorder(200000), payload: max(payload, 16)}
	for i := range subscribers {
		nc, err := n.connect(fmt.Sprintf("bench-fanout-%d", i))
		if err != nil {
			f.close()
			return nil, err
		}
		f.conns = append(f.conns, nc)
		sub, err := nc.Subscribe("bench.fanout", func(m *nats.Msg) {
			if len(m.Data) >= 8 {
				f.rec.add(time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(m.Data))))
			}
			f.deliveries.Add(1)
		})
		if err != nil {
			f.close()
			return nil, err
		}
		sub.SetPendingLimits(1<<16, 64<<20)
		f.subs = append(f.subs, sub)
		if err := nc.Flush(); err != nil {
			f.close()
			return nil, err
		}
	}
	pub, err := n.connect("bench-fanout-pub")
	if err != nil {
		f.close()
		return nil, err
	}
	f.pub = pub
	return f, ctx.Err()
}

func (f *natsFanout) close() {
	for _, nc := range append(f.conns, f.pub) {
		if nc != nil {
			nc.Close()
		}
	}
}

// step publishes at rate for d with each message stamped with its intended
// send time, then waits for delivery to settle.
func (f *natsFanout) step(ctx context.Context, rate int, d time.Duration) stepResult {
	before := f.deliveries.Load()
	sch := newSchedule(time.Now(), rate)
	total := sch.count(d)
	var lagMax time.Duration
	var sent int64
	for ; sent < total && ctx.Err() == nil; sent++ {
		due := sch.due(sent)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		} else {
			lagMax = max(lagMax, -wait)
		}
		msg := make([]byte, f.payload)
		binary.BigEndian.PutUint64(msg, uint64(due.UnixNano()))
		if err := f.pub.Publish("bench.fanout", msg); err != nil {
			break
		}
	}
	f.pub.FlushTimeout(30 * time.Second)
	want := sent * int64(len(f.subs))
	got := func() int64 { return f.deliveries.Load() - before }
	settle(ctx, got, want)
	return stepResult{rate: rate, sent: sent, delivered: got(), lost: want - got(), elapsed: time.Since(sch.start), lagMax: lagMax}
}

// stepResult is what one fixed-rate step achieved.
type stepResult struct {
	rate      int
	sent      int64
	delivered int64
	lost      int64
	elapsed   time.Duration
	lagMax    time.Duration
}

// keptUp: everything delivered and the sender never more than a tenth of
// the step behind its schedule (the same rule as `felix bench fanout --max`).
func (s stepResult) keptUp(d time.Duration) bool {
	return s.sent > 0 && s.lost == 0 && s.lagMax <= d/10
}

func natsFanoutRun(ctx context.Context, n *natsNode, subscribers, rate, payload int, d time.Duration) (figures, error) {
	f, err := newNATSFanout(ctx, n, subscribers, payload)
	if err != nil {
		return nil, err
	}
	defer f.close()
	s := f.step(ctx, rate, d)
	q := f.rec.quantilesMS(0.5, 0.99, 0.999)
	if q == nil {
		return nil, errors.New("nats fanout: nothing delivered")
	}
	return figures{
		"deliveries_per_s": float64(s.delivered) / s.elapsed.Seconds(),
		"lost":             float64(s.lost),
		"delivered":        float64(s.delivered),
		"p50_ms":           q[0], "p99_ms": q[1], "p999_ms": q[2],
	}, ctx.Err()
}

// natsFanoutMax searches the highest rate delivered without loss the same
// way `felix bench fanout --max` does: double, then bisect.
func natsFanoutMax(ctx context.Context, n *natsNode, subscribers, startRate, maxRate, maxSteps, payload int, d time.Duration) (figures, error) {
	f, err := newNATSFanout(ctx, n, subscribers, payload)
	if err != nil {
		return nil, err
	}
	defer f.close()
	good := searchMaxRate(startRate, maxRate, maxSteps, func(rate int) bool {
		return ctx.Err() == nil && f.step(ctx, rate, d).keptUp(d)
	})
	return figures{"max_rate": float64(good)}, ctx.Err()
}

// searchMaxRate doubles the rate from start until ok fails (or maxRate is
// passed), then bisects between the last good and first bad rate until
// they are within 5%, in at most maxSteps calls. It returns the best good
// rate, 0 if none was.
func searchMaxRate(start, maxRate, maxSteps int, ok func(rate int) bool) int {
	good, bad := 0, 0
	rate := max(1, start)
	for range maxSteps {
		if bad == 0 && rate > maxRate {
			break
		}
		if ok(rate) {
			good = rate
		} else {
			bad = rate
		}
		if bad == 0 {
			rate *= 2
			continue
		}
		if bad-good <= max(1, good/20) {
			break
		}
		rate = (good + bad) / 2
	}
	return good
}

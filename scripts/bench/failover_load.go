package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// The failover workload's load: one publisher, one acknowledged publish at
// a time through a ClusterClient, and one subscriber from the earliest
// offset through the same client. Each payload starts with the moment its
// publish was sent (Unix nanoseconds, big-endian), so both sides can tell
// a record published after the kill from one published before it.

// failoverPayload is the payload size: the send time and the sequence.
const failoverPayload = 16

// encodeSent returns a payload carrying the send time and the sequence.
func encodeSent(sent time.Time, seq uint64) []byte {
	b := make([]byte, failoverPayload)
	binary.BigEndian.PutUint64(b, uint64(sent.UnixNano()))
	binary.BigEndian.PutUint64(b[8:], seq)
	return b
}

// decodeSent returns the send time a payload carries, or false.
func decodeSent(b []byte) (time.Time, bool) {
	if len(b) != failoverPayload {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))), true
}

// killWatch records, for one kill, the first acknowledgement of a publish
// sent after it and the first delivery of such a record.
type killWatch struct {
	mu        sync.Mutex // guards the fields below
	killedAt  time.Time  // zero until the kill
	acked     time.Time  // first ack of a publish sent after killedAt
	delivered time.Time  // first delivery of a record sent after killedAt
	acks      int        // acknowledged publishes, before and after the kill
	events    int        // delivered events, before and after the kill
	pubErrs   int        // publishes that failed after the kill
	lastErr   error      // the latest publish failure after the kill
	resubs    int        // times the subscriber subscribed again itself
}

// kill records the moment of the kill.
func (w *killWatch) kill(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.killedAt = at
}

// ack records an acknowledgement of a publish sent at sent.
func (w *killWatch) ack(sent, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acks++
	if !w.killedAt.IsZero() && sent.After(w.killedAt) && w.acked.IsZero() {
		w.acked = at
	}
}

// failed records a failed publish.
func (w *killWatch) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.killedAt.IsZero() {
		w.pubErrs++
		w.lastErr = err
	}
}

// deliver records a delivery of a record sent at sent.
func (w *killWatch) deliver(sent, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if !w.killedAt.IsZero() && sent.After(w.killedAt) && w.delivered.IsZero() {
		w.delivered = at
	}
}

// resubscribed counts a subscription the subscriber opened again.
func (w *killWatch) resubscribed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resubs++
}

// killTimes is a snapshot of a killWatch.
type killTimes struct {
	killedAt, acked, delivered time.Time
	acks, events, pubErrs      int
	resubs                     int
	lastErr                    error
}

func (w *killWatch) snapshot() killTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	return killTimes{killedAt: w.killedAt, acked: w.acked, delivered: w.delivered, acks: w.acks,
		events: w.events, pubErrs: w.pubErrs, resubs: w.resubs, lastErr: w.lastErr}
}

// publishLoop publishes one acknowledged record at a time until ctx ends,
// each bounded by call (--failover-call-timeout). A call to a broker that
// died unannounced waits for its context (over QUIC nothing closes until
// the 6 s idle timeout), so it is kept short, as an application's would
// be, and the next publish is sent when it ends: the figures are late by
// up to call.
func publishLoop(ctx context.Context, cc *felix.ClusterClient, ns, stream string, call time.Duration, w *killWatch) {
	for seq := uint64(0); ctx.Err() == nil; seq++ {
		sent := time.Now()
		pctx, cancel := context.WithTimeout(ctx, call)
		_, err := cc.PublishAcked(pctx, ns, stream, encodeSent(sent, seq), felix.AckPerMessage)
		cancel()
		switch {
		case err == nil:
			w.ack(sent, time.Now())
		case ctx.Err() != nil:
			return
		default:
			w.failed(err)
			sleepCtx(ctx, 20*time.Millisecond)
		}
	}
}

// subscribeLoop reads shard 0 of the stream from the earliest offset until
// ctx ends. The ClusterSubscription resumes by itself; when it gives up
// (its attempts run out during a failover), the loop subscribes again
// after the last offset it read.
func subscribeLoop(ctx context.Context, cc *felix.ClusterClient, ns, stream string, w *killWatch, ready chan<- error) {
	defer func() {
		if ready != nil { // ctx ended before the first subscription
			ready <- ctx.Err()
		}
	}()
	start := felix.Earliest()
	firstBy := time.Now().Add(15 * time.Second) // a new stream reaches every broker soon after its create
	for ctx.Err() == nil {
		sub, err := cc.SubscribeFrom(ctx, ns, stream, felix.SubscribeOptions{Start: start})
		if ready != nil && (err == nil || time.Now().After(firstBy)) {
			ready <- err
			ready = nil
			if err != nil {
				return
			}
		}
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				break
			}
			if sent, ok := decodeSent(ev.Payload); ok {
				w.deliver(sent, time.Now())
			}
			if ev.HasOffset {
				start = felix.AtOffset(ev.Offset + 1)
			}
		}
		sub.Close()
		if ctx.Err() == nil {
			w.resubscribed()
		}
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// runLoad starts the subscriber and then the publisher on cc and returns
// a function that stops both and waits for them.
func runLoad(ctx context.Context, cc *felix.ClusterClient, ns, stream string, call time.Duration, w *killWatch) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() { cancel(); wg.Wait() }
	ready := make(chan error, 1)
	wg.Go(func() { subscribeLoop(ctx, cc, ns, stream, w, ready) })
	if err := <-ready; err != nil {
		stop()
		return nil, fmt.Errorf("subscribe to %s: %w", stream, err)
	}
	wg.Go(func() { publishLoop(ctx, cc, ns, stream, call, w) })
	return stop, nil
}

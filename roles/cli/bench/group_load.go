package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/felixmq/felix/sdk/felix"
)

// groupPublishBatch and groupPublishers shape the publishing of a
// throughput run's records: acked batches of this many, this many in
// flight.
const (
	groupPublishBatch = 100
	groupPublishers   = 8
	// groupPollWait is how long a throughput poll waits for work.
	groupPollWait = 200 * time.Millisecond
)

// groupRig is the durable stream a group run reads, and the connection
// that publishes to it.
type groupRig struct {
	t      *target
	p      groupParams
	stream string
	pubC   *felix.Client
}

// runGroup creates a one-shard durable stream, runs the mode and deletes
// the stream.
func runGroup(ctx context.Context, t *target, p groupParams) (*result, error) {
	stream, err := t.admin.createStream(ctx, t.ns, "bench-group", streamSpec{durable: true})
	if err != nil {
		return nil, err
	}
	defer t.admin.deleteStream(context.Background(), t.ns, stream)
	pubC, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer pubC.Close()
	if !pubC.SupportsGroups() {
		return nil, fmt.Errorf("the broker serves no consumer groups (they need durable storage)")
	}
	g := &groupRig{t: t, p: p, stream: stream, pubC: pubC}
	if p.mode == groupLatency {
		return g.latency(ctx)
	}
	return g.throughput(ctx)
}

// createGroup creates a uniquely named group at start, waiting for the
// broker to learn of the stream.
func (g *groupRig) createGroup(ctx context.Context, start felix.GroupStart) (string, error) {
	name := uniqueName("bench")
	err := whenReady(ctx, func() error {
		_, _, err := g.pubC.GroupCreate(ctx, g.t.ns, g.stream, 0, name, start)
		return err
	})
	return name, err
}

// connectConsumers opens n connections; after a failure it closes those
// it opened.
func (g *groupRig) connectConsumers(ctx context.Context, n int) ([]*felix.Client, error) {
	cs := make([]*felix.Client, 0, n)
	for i := range n {
		c, err := g.t.connect(ctx)
		if err != nil {
			closeAll(cs)
			return nil, fmt.Errorf("consumer %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeAll(cs []*felix.Client) {
	for _, c := range cs {
		c.Close()
	}
}

// publishRecords publishes n records in acked batches, groupPublishers
// batches in flight, and returns the first error.
func (g *groupRig) publishRecords(ctx context.Context, n int) error {
	rec := make([]byte, g.p.payload)
	var claimed atomic.Int64
	eg, ectx := errgroup.WithContext(ctx)
	for range groupPublishers {
		eg.Go(func() error {
			for {
				first := claimed.Add(groupPublishBatch) - groupPublishBatch
				if first >= int64(n) || ectx.Err() != nil {
					return ectx.Err()
				}
				k := min(groupPublishBatch, int64(n)-first)
				batch := make([][]byte, k)
				for i := range batch {
					batch[i] = rec
				}
				if err := g.pubC.PublishBatch(ectx, g.t.ns, g.stream, batch, felix.AckPerBatch); err != nil {
					return fmt.Errorf("publishing the records: %w", err)
				}
			}
		})
	}
	return eg.Wait()
}

// throughput publishes the records once (unless they go out with each
// step) and runs one step per consumer count, each with a fresh group.
func (g *groupRig) throughput(ctx context.Context) (*result, error) {
	published := g.t.progress.counter("acked")
	if !g.p.publish {
		if _, err := g.createGroup(ctx, felix.GroupEarliest); err != nil { // the stream is known from here on
			return nil, err
		}
		if err := g.publishRecords(ctx, g.p.records); err != nil {
			return nil, err
		}
	}
	var steps []groupStep
	for _, n := range g.p.steps {
		s, err := g.step(ctx, n, published)
		if err != nil {
			return nil, err
		}
		steps = append(steps, s)
	}
	return groupThroughputResult(g.p, steps), nil
}

// step has n consumers drain p.records records through a new group, each
// polling up to p.max and acking every record polled, the acks of one poll
// sent together, before it polls again.
func (g *groupRig) step(ctx context.Context, n int, progress *atomic.Int64) (groupStep, error) {
	start := felix.GroupEarliest
	if g.p.publish {
		start = felix.GroupLatest
	}
	group, err := g.createGroup(ctx, start)
	if err != nil {
		return groupStep{}, err
	}
	cs, err := g.connectConsumers(ctx, n)
	if err != nil {
		return groupStep{}, err
	}
	defer closeAll(cs)
	stepCtx, stop := context.WithTimeout(ctx, g.p.duration)
	defer stop()
	var acked, pollErrs, ackErrs atomic.Int64
	want := int64(g.p.records)
	var wg sync.WaitGroup
	var pubErr error
	begin := time.Now()
	if g.p.publish {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if pubErr = g.publishRecords(stepCtx, g.p.records); stepCtx.Err() != nil {
				pubErr = nil
			}
		}()
	}
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stepCtx.Err() == nil && acked.Load() < want {
				recs, err := c.GroupPoll(stepCtx, g.t.ns, g.stream, 0, group, g.p.max, felix.GroupPollOptions{Wait: groupPollWait})
				if err != nil {
					if stepCtx.Err() == nil {
						pollErrs.Add(1)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				ok, bad := ackAll(stepCtx, c, g.t.ns, g.stream, group, recs)
				ackErrs.Add(bad)
				progress.Add(ok)
				if acked.Add(ok) >= want {
					stop()
				}
			}
		}()
	}
	wg.Wait()
	s := groupStep{consumers: n, acked: acked.Load(), elapsed: time.Since(begin), pollErrors: pollErrs.Load(), ackErrors: ackErrs.Load()}
	return s, pubErr
}

// ackAll acks every record at once and waits for every answer; it returns
// how many were acked and how many failed (not counting those the end of
// ctx cut off).
func ackAll(ctx context.Context, c *felix.Client, ns, stream, group string, recs []felix.GroupRecord) (ok, failed int64) {
	var okN, bad atomic.Int64
	var wg sync.WaitGroup
	for _, r := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.GroupAck(ctx, ns, stream, 0, group, r.Offset); err == nil {
				okN.Add(1)
			} else if ctx.Err() == nil {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	return okN.Load(), bad.Load()
}

// latency runs the consumers' Consume loops while one publisher sends
// p.rate records a second for p.duration, each stamped with its intended
// send time, and measures from that stamp to the handler.
func (g *groupRig) latency(ctx context.Context) (*result, error) {
	group, err := g.createGroup(ctx, felix.GroupEarliest)
	if err != nil {
		return nil, err
	}
	n := g.p.steps[0]
	cs, err := g.connectConsumers(ctx, n)
	if err != nil {
		return nil, err
	}
	defer closeAll(cs)
	handled := g.t.progress.counter("handled")
	var consumeErrs atomic.Int64
	lats := make([]*latencies, n)
	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	var wg sync.WaitGroup
	for i, c := range cs {
		lat := newLatencies(100000)
		lats[i] = lat
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Group(g.t.ns, g.stream, 0, group).Consume(recvCtx, func(_ context.Context, r felix.GroupRecord) error {
				if len(r.Payload) >= groupStampBytes {
					lat.add(time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(r.Payload))))
				}
				handled.Add(1)
				return nil
			}, felix.ConsumeOptions{MaxRecords: g.p.max, Wait: time.Second})
			if err != nil {
				consumeErrs.Add(1)
			}
		}()
	}
	var pubErrs atomic.Int64
	payload := make([]byte, g.p.payload)
	sent, lagMax := paced(ctx, g.p.rate, g.p.duration, -1, func(_ int, due time.Time) {
		msg := append([]byte(nil), payload...)
		binary.BigEndian.PutUint64(msg, uint64(due.UnixNano()))
		if err := g.pubC.Publish(ctx, g.t.ns, g.stream, msg, felix.AckNone); err != nil {
			pubErrs.Add(1)
		}
	})
	if err := g.pubC.Finish(ctx); err != nil {
		pubErrs.Add(1)
	}
	settle(ctx, handled.Load, int64(sent))
	stopRecv()
	wg.Wait()
	all := newLatencies(200000)
	for _, l := range lats {
		all.merge(l)
	}
	return groupLatencyResult(g.p, groupLatencyMeasure{sent: int64(sent), handled: handled.Load(),
		errors: pubErrs.Load() + consumeErrs.Load(), lagMax: lagMax, lat: all}), nil
}

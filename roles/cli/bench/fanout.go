package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

type fanoutParams struct {
	subscribers int
	connections int
	rate        int // messages per second
	payload     int
	duration    time.Duration
	policy      string
}

// fanoutRig is one stream with its subscribers and a publisher, reused by
// every step of a fanout run.
type fanoutRig struct {
	t      *target
	p      fanoutParams
	stream string
	receivers
	pubC *felix.Client
	lats []*latencies // one per subscriber, each owned by its reader until stop
}

// newFanoutRig creates the stream, connects and subscribes everyone and
// starts one reader per subscription. close undoes all of it.
func newFanoutRig(ctx context.Context, t *target, p fanoutParams) (*fanoutRig, error) {
	if p.connections <= 0 || p.connections > p.subscribers {
		p.connections = p.subscribers
	}
	p.payload = max(p.payload, 16)
	g := &fanoutRig{t: t, p: p}
	var err error
	if g.stream, err = t.admin.createStream(ctx, t.ns, "bench-fanout", streamSpec{policy: p.policy, shards: 1}); err != nil {
		return nil, err
	}
	recvCtx, stop := context.WithCancel(ctx)
	g.stopRecv = stop
	if err := g.connect(ctx, t, p.connections); err != nil {
		g.close()
		return nil, err
	}
	for i := range p.subscribers {
		sub, err := subscribeWhenReady(ctx, g.clients[i%len(g.clients)], t.ns, g.stream)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("subscriber %d: %w", i, err)
		}
		lat := newLatencies(20000)
		g.lats = append(g.lats, lat)
		g.wg.Add(1)
		go g.read(recvCtx, sub, lat)
	}
	if g.pubC, err = t.connect(ctx); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *fanoutRig) read(ctx context.Context, sub *felix.Subscription, lat *latencies) {
	defer g.wg.Done()
	defer sub.Close()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			g.readEnded(ctx)
			return
		}
		if len(ev.Payload) >= 8 {
			sent := int64(binary.BigEndian.Uint64(ev.Payload))
			lat.add(time.Duration(time.Now().UnixNano() - sent))
		}
		g.deliveries.Add(1)
	}
}

// close stops the readers, closes every connection and deletes the stream.
func (g *fanoutRig) close() {
	g.receivers.close(g.pubC)
	g.t.admin.deleteStream(context.Background(), g.t.ns, g.stream)
}

// stepResult is what one fixed-rate step achieved.
type stepResult struct {
	rate      int
	sent      int64
	delivered int64
	lost      int64
	elapsed   time.Duration
	lagMax    time.Duration // how far the publisher fell behind its schedule
}

// step publishes at rate for d, stamping each message with its intended
// send time, then waits until every delivery arrived or delivery stalled.
func (g *fanoutRig) step(ctx context.Context, rate int, d time.Duration) stepResult {
	before := g.deliveries.Load()
	start := time.Now()
	payload := make([]byte, g.p.payload)
	n, lagMax := paced(ctx, rate, d, -1, func(_ int, due time.Time) {
		msg := append([]byte(nil), payload...)
		binary.BigEndian.PutUint64(msg, uint64(due.UnixNano()))
		if err := g.pubC.Publish(ctx, g.t.ns, g.stream, msg, felix.AckNone); err != nil {
			g.errs.Add(1)
		}
	})
	g.pubC.Finish(ctx)
	sent := int64(n)
	want := sent * int64(g.p.subscribers)
	g.settle(ctx, before, want)
	got := g.deliveries.Load() - before
	return stepResult{rate: rate, sent: sent, delivered: got, lost: want - got, elapsed: time.Since(start), lagMax: lagMax}
}

// runFanout publishes at a fixed rate to many subscribers and measures
// publish-to-delivery latency from each message's intended send time, so a
// stalled sender cannot hide its own delay (no coordinated omission).
func runFanout(ctx context.Context, t *target, p fanoutParams) (*result, error) {
	g, err := newFanoutRig(ctx, t, p)
	if err != nil {
		return nil, err
	}
	s := g.step(ctx, p.rate, p.duration)
	g.close()
	all := newLatencies(200000)
	for _, l := range g.lats {
		all.merge(l)
	}
	r := &result{Scenario: "fanout", Params: map[string]any{
		"subscribers": p.subscribers, "connections": g.p.connections, "rate": p.rate,
		"payload_bytes": g.p.payload, "duration": p.duration.String(), "policy": p.policy,
	}}
	r.add("deliveries_per_s", float64(s.delivered)/s.elapsed.Seconds(), "deliveries/s")
	r.add("published", float64(s.sent), "msgs")
	r.add("delivered", float64(s.delivered), "deliveries")
	r.add("lost", float64(s.lost), "deliveries")
	r.add("errors", float64(g.errs.Load()), "errors")
	r.addLatency("publish_to_delivery", all)
	return r, nil
}

// keptUp says whether a step delivered everything without the publisher
// falling more than a tenth of the step behind its schedule.
func (s stepResult) keptUp(d time.Duration) bool {
	return s.sent > 0 && s.lost == 0 && s.lagMax <= d/10
}

// runFanoutMax searches for the highest publish rate the subscribers keep up
// with: the rate doubles from p.rate until a step loses deliveries or falls
// behind, then bisects between the last good and the first bad rate.
func runFanoutMax(ctx context.Context, t *target, p fanoutParams, maxRate, maxSteps int) (*result, error) {
	g, err := newFanoutRig(ctx, t, p)
	if err != nil {
		return nil, err
	}
	defer g.close()
	good, bad := 0, 0
	rate := max(1, p.rate)
	steps := 0
	for ; steps < maxSteps && ctx.Err() == nil; steps++ {
		if bad == 0 && rate > maxRate {
			break
		}
		if g.step(ctx, rate, p.duration).keptUp(p.duration) {
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &result{Scenario: "fanout-max", Params: map[string]any{
		"subscribers": p.subscribers, "connections": g.p.connections, "start_rate": p.rate,
		"payload_bytes": g.p.payload, "step": p.duration.String(), "policy": p.policy, "steps": steps,
	}}
	r.add("max_rate", float64(good), "msg/s")
	r.add("max_deliveries_per_s", float64(good*p.subscribers), "deliveries/s")
	r.add("first_failing_rate", float64(bad), "msg/s")
	return r, nil
}

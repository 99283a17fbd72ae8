package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// historyPublishers is how many ClusterClients publish concurrently in a
// history run, each on a connection set of its own.
const historyPublishers = 3

// historyCallTimeout bounds each publish: a call to a broker that died
// unannounced waits for its context, and is then outcome unknown.
const historyCallTimeout = 2 * time.Second

// historyRun records the history of one durable quorum stream of a felix
// dev cluster: publishers send unique payloads with acknowledgements,
// round robin over the shards by key, and one subscriber per shard reads
// from the earliest offset. A scenario injects its faults in between and
// finish turns the run into a checked history.
type historyRun struct {
	t      *testing.T
	d      *devCluster
	ns     string
	stream string
	shards uint32
	keys   [][]byte // keys[s] routes to shard s
	token  string

	stopPub chan struct{}
	pubWG   sync.WaitGroup
	subCtx  context.Context
	subStop context.CancelFunc
	subWG   sync.WaitGroup

	mu         sync.Mutex // guards the fields below
	attempts   []pubAttempt
	deliveries []delivery
	subLast    map[uint32]uint64 // the last offset delivered per shard, +1 (0: none)
	resubs     int
	subErrs    []string
}

// startHistory creates the stream (durable, shards shards, three copies,
// quorum) and starts the publishers and subscribers.
func startHistory(ctx context.Context, t *testing.T, d *devCluster, stream string, shards uint32) *historyRun {
	t.Helper()
	d.createReplicated(ctx, stream, int(shards), 3, "quorum")
	r := &historyRun{t: t, d: d, ns: d.client.Namespace, stream: stream, shards: shards, token: d.adminToken(),
		stopPub: make(chan struct{}), subLast: map[uint32]uint64{}}
	for s := range shards {
		r.keys = append(r.keys, keyForShard(s, shards))
	}
	r.subCtx, r.subStop = context.WithCancel(ctx)
	subCC := d.connectCluster(ctx, r.token)
	for s := range shards {
		r.subWG.Go(func() { r.subscribe(subCC, s) })
	}
	for i := range historyPublishers {
		cc := d.connectCluster(ctx, r.token)
		r.pubWG.Go(func() { r.publish(ctx, cc, fmt.Sprintf("c%d", i), i) })
	}
	t.Cleanup(r.stop)
	return r
}

// publish sends unique payloads until stopped, each to the next shard.
func (r *historyRun) publish(ctx context.Context, cc *felix.ClusterClient, client string, first int) {
	for n := 0; ctx.Err() == nil; n++ {
		select {
		case <-r.stopPub:
			return
		default:
		}
		shard := uint32(first+n) % r.shards
		payload := fmt.Sprintf("%s-%s-%06d", r.stream, client, n)
		a := r.publishOne(ctx, historyCallTimeout, client, shard, payload, func(pctx context.Context) (felix.PublishResult, error) {
			return cc.PublishKeyedAcked(pctx, r.ns, r.stream, r.keys[shard], []byte(payload), felix.AckPerMessage)
		})
		if a.outcome != pubAcked {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// publishOne runs one publish bounded by timeout and records it.
func (r *historyRun) publishOne(ctx context.Context, timeout time.Duration, client string, shard uint32, payload string,
	call func(context.Context) (felix.PublishResult, error)) pubAttempt {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	a := pubAttempt{client: client, shard: shard, payload: payload, start: time.Now()}
	res, err := call(pctx)
	cancel()
	a.end = time.Now()
	switch {
	case err == nil && res.HasOffset:
		a.outcome, a.offset = pubAcked, res.Offset
	case err == nil:
		a.outcome, a.err = pubUnknown, "acknowledged without an offset"
	default:
		a.outcome, a.err = publishOutcome(err), err.Error()
	}
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
	return a
}

// publishOutcome classifies a failed publish: refused when the broker's
// retry class says nothing was written, unknown otherwise (outcome
// unknown, the call's deadline, a lost connection).
func publishOutcome(err error) pubResult {
	var be *felix.BrokerError
	if errors.As(err, &be) && be.Retry != wire.RetryOutcomeUnknown {
		return pubRefused
	}
	return pubUnknown
}

// subscribe records every event of one shard from the earliest offset
// until stopped. A ClusterSubscription resumes by itself; one that gives
// up is opened again after the last event it delivered, as an
// application would.
func (r *historyRun) subscribe(cc *felix.ClusterClient, shard uint32) {
	ctx := r.subCtx
	start := felix.Earliest()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			r.mu.Lock()
			r.resubs++
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		sub, err := cc.SubscribeFrom(ctx, r.ns, r.stream, felix.SubscribeOptions{Start: start, Shard: shard})
		if err != nil {
			r.subErr(shard, err)
			continue
		}
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				r.subErr(shard, err)
				break
			}
			r.mu.Lock()
			r.deliveries = append(r.deliveries, delivery{sub: int(shard), shard: shard, offset: ev.Offset,
				payload: string(ev.Payload), skipped: ev.SkippedBefore})
			r.subLast[shard] = ev.Offset + 1
			start = felix.AtOffset(ev.Offset + 1)
			r.mu.Unlock()
		}
		sub.Close()
	}
}

func (r *historyRun) subErr(shard uint32, err error) {
	if r.subCtx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subErrs = append(r.subErrs, fmt.Sprintf("shard %d: %v", shard, err))
}

// stop ends the publishers and subscribers and waits for them.
func (r *historyRun) stop() {
	r.stopPublishers()
	r.subStop()
	r.subWG.Wait()
}

func (r *historyRun) stopPublishers() {
	select {
	case <-r.stopPub:
	default:
		close(r.stopPub)
	}
	r.pubWG.Wait()
}

// ackedSince reports, per shard, whether a publish started after since
// was acknowledged.
func (r *historyRun) ackedSince(since time.Time) map[uint32]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[uint32]bool{}
	for _, a := range r.attempts {
		if a.outcome == pubAcked && a.start.After(since) {
			out[a.shard] = true
		}
	}
	return out
}

// waitProgress waits until every shard has acknowledged at least n
// publishes started after since: the cluster serves every shard again.
func (r *historyRun) waitProgress(since time.Time, n int, within time.Duration) {
	r.t.Helper()
	eventually(r.t, within, fmt.Sprintf("%d publishes acknowledged on every shard", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		count := map[uint32]int{}
		for _, a := range r.attempts {
			if a.outcome == pubAcked && a.start.After(since) {
				count[a.shard]++
			}
		}
		for s := range r.shards {
			if count[s] < n {
				return false
			}
		}
		return true
	})
}

// attemptsBetween returns the attempts started after from that ended
// before to.
func (r *historyRun) attemptsBetween(from, to time.Time) []pubAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pubAttempt
	for _, a := range r.attempts {
		if a.start.After(from) && a.end.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// leaders returns each shard's current serving leader (a node name), once
// every shard has one.
func (r *historyRun) leaders(ctx context.Context) []string {
	r.t.Helper()
	out := make([]string, r.shards)
	eventually(r.t, expiryWait, r.stream+"'s shards served", func() bool {
		v, ok := r.placement(ctx, "")
		if !ok || settledOwners(v, int(r.shards)) != "" {
			return false
		}
		for _, a := range v.Shards {
			out[a.Shard] = nodeNameOf(a.NodeID)
		}
		return true
	})
	return out
}

// placement asks the control plane of each running node but avoid, in
// turn, for the stream's placement (the CLI's default control plane may
// be the one a fault stopped); false when none answers.
func (r *historyRun) placement(ctx context.Context, avoid string) (wire.PlacementView, bool) {
	for _, n := range r.d.nodes {
		if n.Name == avoid || !processAlive(n.PID) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, ok := r.d.placementAt(pctx, n, r.stream)
		cancel()
		if ok {
			return v, true
		}
	}
	return wire.PlacementView{}, false
}

// shardCaughtUp reports whether leader ships the shard to two followers
// that hold all of its log.
func (r *historyRun) shardCaughtUp(leader string, shard uint32) bool {
	followers, err := r.d.replicationFollowers(leader)
	if err != nil {
		return false
	}
	n := 0
	for _, f := range followers {
		if f.Stream != r.stream || f.Shard != shard {
			continue
		}
		if f.Lag != 0 || f.Halted != "" || f.Durable != f.LeaderNext {
			return false
		}
		n++
	}
	return n == 2
}

// finish stops the publishers, waits until every shard's followers hold
// its leader's log, reads each shard's final log from its leader, waits
// for the subscribers to deliver it, stops every node (SIGKILL: with
// fsync always nothing acknowledged may be lost by it) and reads every
// node's copy from its disk. It returns the history to check.
func (r *historyRun) finish(ctx context.Context) *history {
	r.t.Helper()
	r.stopPublishers()
	leaders := r.leaders(ctx)
	for s, l := range leaders {
		if !waitUntil(replWait, func() bool { return r.shardCaughtUp(l, uint32(s)) }) {
			r.t.Errorf("shard %d: leader %s's followers never caught up (GET /replication)", s, l)
		}
	}
	h := &history{final: map[uint32][]logRecord{}}
	cc := r.d.connectCluster(ctx, r.token)
	for s := range r.shards {
		h.final[s] = r.readFinal(ctx, cc, s)
	}
	for s := range r.shards {
		recs := h.final[s]
		if len(recs) == 0 {
			continue
		}
		last := recs[len(recs)-1].offset
		if !waitUntil(replWait, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.subLast[s] > last }) {
			r.t.Errorf("shard %d: the subscriber never delivered up to offset %d, the final log's last", s, last)
		}
	}
	r.subStop()
	r.subWG.Wait()
	for _, n := range r.d.nodes {
		if processAlive(n.PID) {
			r.d.kill9(n.Name)
		}
	}
	for s, l := range leaders {
		for _, n := range r.d.nodes {
			recs, err := r.d.shardCopy(n.Name, r.stream, uint32(s))
			if err != nil {
				r.t.Errorf("%s's copy of shard %d: %v", n.Name, s, err)
				continue
			}
			h.copies = append(h.copies, shardCopyOf{node: n.Name, shard: uint32(s), leader: n.Name == l, records: recs})
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h.attempts = append(h.attempts, r.attempts...)
	h.deliveries = append(h.deliveries, r.deliveries...)
	r.logSummary(h)
	return h
}

// readFinal reads a shard's committed records from its leader, page by
// page, until a page comes back empty.
func (r *historyRun) readFinal(ctx context.Context, cc *felix.ClusterClient, shard uint32) []logRecord {
	r.t.Helper()
	var out []logRecord
	for from := uint64(0); ; {
		var page *felix.ReadPage
		var err error
		if !waitUntil(replWait, func() bool {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			page, err = cc.Read(rctx, r.ns, r.stream, shard, from, nil, 0)
			return err == nil
		}) {
			r.t.Fatalf("read shard %d of %s from %d: %v", shard, r.stream, from, err)
		}
		if len(page.Records) == 0 {
			return out
		}
		for _, rec := range page.Records {
			out = append(out, logRecord{offset: rec.Offset, payload: string(rec.Payload)})
		}
		from = page.NextOffset
	}
}

// logSummary logs what the run recorded: publishes by outcome and error,
// deliveries, resubscriptions.
func (r *historyRun) logSummary(h *history) {
	count := map[pubResult]int{}
	errs := map[string]int{}
	for _, a := range h.attempts {
		count[a.outcome]++
		if a.outcome != pubAcked {
			errs[errorKind(a.err)]++
		}
	}
	var kinds []string
	for k, n := range errs {
		kinds = append(kinds, fmt.Sprintf("%d× %s", n, k))
	}
	sort.Strings(kinds)
	records, skipped := 0, uint64(0)
	for _, recs := range h.final {
		records += len(recs)
	}
	for _, d := range h.deliveries {
		skipped += d.skipped
	}
	copies := map[string]int{}
	for _, c := range h.copies {
		copies[fmt.Sprintf("%s/%d", c.node, c.shard)] = len(c.records)
	}
	r.t.Logf("records per copy (node/shard): %v", copies)
	r.t.Logf("%s: %d publishes acknowledged, %d refused, %d outcome unknown %v; %d records in the final logs; %d deliveries, skipping %d offsets (generation starts); %d subscriptions opened again; subscription errors %v",
		r.stream, count[pubAcked], count[pubRefused], count[pubUnknown], kinds, records, len(h.deliveries), skipped, r.resubs, r.subErrs)
}

// errorKind shortens an error's text to what kind of failure it was.
func errorKind(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

// waitUntil polls cond every 50 ms until it holds (true) or within
// passes (false).
func waitUntil(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// checkHistory runs the checker and fails the test with every violation.
func checkHistory(t *testing.T, h *history) {
	t.Helper()
	v := h.check()
	const show = 30
	for i, s := range v {
		if i == show {
			t.Errorf("… and %d more violations", len(v)-show)
			break
		}
		t.Error(s)
	}
}

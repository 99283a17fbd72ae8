package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// failoverAck is one publish the failover tests' publisher had
// acknowledged: the offset the broker gave it and its unique payload.
type failoverAck struct {
	offset  uint64
	payload string
	at      time.Time
}

// failoverPublisher publishes to shard 0 of one stream through a
// ClusterClient, one acknowledged publish at a time, each with a payload
// of its own (a failed publish is retried with a new one). It records
// every acknowledgement and every failure that is neither retryable nor
// outcome-unknown.
type failoverPublisher struct {
	cc        *felix.ClusterClient
	namespace string
	stream    string
	prefix    string // of the payloads (the stream's name by default)
	stop      chan struct{}
	wg        sync.WaitGroup

	mu         sync.Mutex // guards the fields below
	acked      []failoverAck
	failures   int
	unexpected []error
	// firstErrs are the first failures, whatever their class.
	firstErrs []error
}

// startFailoverPublisher starts the publisher; it runs until stopped or
// ctx ends.
func startFailoverPublisher(ctx context.Context, cc *felix.ClusterClient, namespace, stream string) *failoverPublisher {
	return startFailoverPublisherAs(ctx, cc, namespace, stream, stream)
}

// startFailoverPublisherAs is startFailoverPublisher with payloads that
// start with prefix (a second publisher to the same stream needs its own).
func startFailoverPublisherAs(ctx context.Context, cc *felix.ClusterClient, namespace, stream, prefix string) *failoverPublisher {
	p := &failoverPublisher{cc: cc, namespace: namespace, stream: stream, prefix: prefix, stop: make(chan struct{})}
	p.wg.Go(func() { p.run(ctx) })
	return p
}

func (p *failoverPublisher) run(ctx context.Context) {
	// A call to a broker that died unannounced (QUIC notices no closed
	// socket) waits for its context: keep it short, so that the time to
	// the first acknowledgement after a kill measures the takeover.
	const callTimeout = 2 * time.Second
	for i := 0; ctx.Err() == nil; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		payload := fmt.Sprintf("%s-%06d", p.prefix, i)
		pctx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := p.cc.PublishAcked(pctx, p.namespace, p.stream, []byte(payload), felix.AckPerMessage)
		cancel()
		p.mu.Lock()
		switch {
		case err == nil && !res.HasOffset:
			p.unexpected = append(p.unexpected, fmt.Errorf("publish %s acknowledged without an offset", payload))
		case err == nil:
			p.acked = append(p.acked, failoverAck{offset: res.Offset, payload: payload, at: time.Now()})
		case ctx.Err() != nil:
		default:
			p.failures++
			if len(p.firstErrs) < 10 {
				p.firstErrs = append(p.firstErrs, fmt.Errorf("publish %s at %s: %w", payload, time.Now().Format("15:04:05.000"), err))
			}
			if !acceptablePublishFailure(err) {
				p.unexpected = append(p.unexpected, fmt.Errorf("publish %s: %w", payload, err))
			}
		}
		p.mu.Unlock()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// halt stops the publisher and waits for its last publish to end.
func (p *failoverPublisher) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}

// ackedCount is how many publishes were acknowledged so far.
func (p *failoverPublisher) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// firstAckAfter returns the first acknowledgement after t.
func (p *failoverPublisher) firstAckAfter(t time.Time) (failoverAck, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.acked {
		if a.at.After(t) {
			return a, true
		}
	}
	return failoverAck{}, false
}

// results returns every acknowledgement, the failure count and the
// unexpected failures.
func (p *failoverPublisher) results() ([]failoverAck, int, []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]failoverAck(nil), p.acked...), p.failures, append([]error(nil), p.unexpected...)
}

// createReplicatedStream creates a durable one-shard stream with three
// replicas and the consistency given, and returns its assignment once it
// has a serving leader and two followers.
func (d *devCluster) createReplicatedStream(ctx context.Context, name, consistency string) wire.ShardAssignment {
	d.t.Helper()
	d.mustFelix(ctx, "admin", "stream", "create", name, "--durable", "--shards", "1",
		"--replication-factor", "3", "--consistency", consistency)
	var a wire.ShardAssignment
	eventually(d.t, expiryWait, name+" placed with a leader and two followers", func() bool {
		v := d.placement(ctx, name)
		if len(v.Shards) != 1 {
			return false
		}
		a = v.Shards[0]
		return a.Generation != 0 && a.Unavailable == "" && len(a.Replicas) == 2
	})
	return a
}

// createQuorumStream is createReplicatedStream with consistency quorum.
func (d *devCluster) createQuorumStream(ctx context.Context, name string) wire.ShardAssignment {
	d.t.Helper()
	return d.createReplicatedStream(ctx, name, "quorum")
}

// newLeaderOf waits until the shard of stream name has a serving leader
// other than old, at a generation above gen, and returns the assignment.
func (d *devCluster) newLeaderOf(ctx context.Context, name, old string, gen uint64) wire.ShardAssignment {
	d.t.Helper()
	var a wire.ShardAssignment
	eventually(d.t, expiryWait, name+" led by a broker other than "+old, func() bool {
		v := d.placement(ctx, name)
		if len(v.Shards) != 1 {
			return false
		}
		a = v.Shards[0]
		return a.NodeID != old && a.NodeID != "" && a.Unavailable == "" && a.Generation > gen
	})
	return a
}

// replFollower is one follower of a shard in a broker's GET /replication.
type replFollower struct {
	Stream     string `json:"stream"`
	Shard      uint32 `json:"shard"`
	Follower   string `json:"follower"`
	LeaderNext uint64 `json:"leader_next"`
	Durable    uint64 `json:"durable"`
	Lag        uint64 `json:"lag"`
	Halted     string `json:"halted"`
}

// replicationFollowers fetches GET /replication from a node's metrics
// listener and returns the followers it ships to.
func (d *devCluster) replicationFollowers(nodeName string) ([]replFollower, error) {
	var rep struct {
		Followers []replFollower `json:"followers"`
	}
	resp, err := http.Get("http://" + d.node(nodeName).MetricsAddr + "/replication")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /replication: %s", resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&rep)
	return rep.Followers, err
}

// followersCaughtUp reports whether the leader named leaderName ships
// stream's shard 0 to two followers, each holding all of its log.
func (d *devCluster) followersCaughtUp(leaderName, stream string) bool {
	followers, err := d.replicationFollowers(leaderName)
	if err != nil {
		return false
	}
	n := 0
	for _, f := range followers {
		if f.Stream != stream || f.Shard != 0 {
			continue
		}
		if f.Lag != 0 || f.Halted != "" || f.Durable != f.LeaderNext {
			return false
		}
		n++
	}
	return n == 2
}

// readShard reads every committed record of shard 0 of stream from c,
// page by page, until a page comes back empty.
func readShard(ctx context.Context, t *testing.T, c *felix.Client, namespace, stream string) []felix.Record {
	t.Helper()
	var out []felix.Record
	for from := uint64(0); ; {
		page, err := c.Read(ctx, namespace, stream, 0, from, nil, 0)
		if err != nil {
			t.Fatalf("read %s from %d: %v", stream, from, err)
		}
		if len(page.Records) == 0 {
			return out
		}
		out = append(out, page.Records...)
		from = page.NextOffset
	}
}

// checkAckedPresent checks a shard's records against what was
// acknowledged: offsets strictly increase, no payload appears twice,
// every acknowledged payload is at its acknowledged offset, and the only
// gaps are one offset wide, at most maxGaps of them (a generation start
// per failover). It returns the gaps' offsets.
func checkAckedPresent(t *testing.T, recs []felix.Record, acked []failoverAck, maxGaps int) []uint64 {
	t.Helper()
	byOffset := map[uint64]string{}
	seen := map[string]uint64{}
	var gaps []uint64
	next := uint64(0)
	for i, r := range recs {
		p := string(r.Payload)
		if i > 0 && r.Offset <= recs[i-1].Offset {
			t.Errorf("offset %d after %d: offsets must increase", r.Offset, recs[i-1].Offset)
		}
		if o, dup := seen[p]; dup {
			t.Errorf("payload %q at offsets %d and %d", p, o, r.Offset)
		}
		seen[p], byOffset[r.Offset] = r.Offset, p
		switch {
		case r.Offset == next:
		case r.Offset == next+1:
			gaps = append(gaps, next)
		default:
			t.Errorf("offsets %d..%d missing before %q", next, r.Offset-1, p)
		}
		next = r.Offset + 1
	}
	if len(gaps) > maxGaps {
		t.Errorf("gaps at offsets %v, want at most %d (one generation start per failover)", gaps, maxGaps)
	}
	for _, a := range acked {
		if got, ok := byOffset[a.offset]; !ok || got != a.payload {
			t.Errorf("acknowledged %q at offset %d: the shard holds %q there (present: %v)", a.payload, a.offset, got, ok)
		}
	}
	return gaps
}

// checkSubscriptionSkips subscribes through cc to shard 0 of stream from
// the earliest offset and reads up to offset last: every jump between
// consecutive events must be what the event's SkippedBefore says. It
// returns the offsets the subscription skipped.
func checkSubscriptionSkips(ctx context.Context, t *testing.T, cc *felix.ClusterClient, namespace, stream string, last uint64) []uint64 {
	t.Helper()
	sub, err := cc.SubscribeFrom(ctx, namespace, stream, felix.SubscribeOptions{Start: felix.Earliest()})
	if err != nil {
		t.Fatalf("subscribe to %s from the earliest: %v", stream, err)
	}
	defer sub.Close()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var skipped []uint64
	next := uint64(0)
	for next <= last {
		ev, err := sub.Next(sctx)
		if err != nil {
			t.Fatalf("subscription to %s at offset %d: %v", stream, next, err)
		}
		if ev.Offset-ev.SkippedBefore != next {
			t.Errorf("event at offset %d skipped %d before it, after offset %d: a drop", ev.Offset, ev.SkippedBefore, next-1)
		}
		for o := ev.Offset - ev.SkippedBefore; o < ev.Offset; o++ {
			skipped = append(skipped, o)
		}
		next = ev.Offset + 1
	}
	return skipped
}

// diskRecord is one record of a shard's log as a node's disk holds it.
type diskRecord struct {
	offset, generation uint64
	kind               flog.Kind
	payload            []byte
}

// diskLog scans shard 0 of stream in a node's data directory.
func (d *devCluster) diskLog(nodeName, stream string) ([]diskRecord, error) {
	key := core.StreamKey{Tenant: d.client.Tenant, Namespace: d.client.Namespace, Stream: stream}
	dir := core.ShardDir(filepath.Join(d.node(nodeName).DataDir, "log"), key, 0)
	var out []diskRecord
	_, err := flog.ScanRecords(dir, func(r flog.RecordInfo) error {
		out = append(out, diskRecord{offset: r.Offset, generation: r.Generation, kind: r.Kind, payload: bytes.Clone(r.Payload)})
		return nil
	})
	return out, err
}

// sameLogs compares the disk logs of shard 0 of stream on every node and
// returns the first difference, or nil.
func (d *devCluster) sameLogs(stream string) ([][]diskRecord, error) {
	var logs [][]diskRecord
	for _, n := range d.nodes {
		l, err := d.diskLog(n.Name, stream)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		logs = append(logs, l)
	}
	for i := 1; i < len(logs); i++ {
		if err := diffLogs(logs[0], logs[i]); err != nil {
			return logs, fmt.Errorf("%s and %s: %w", d.nodes[0].Name, d.nodes[i].Name, err)
		}
	}
	return logs, nil
}

// diffLogs returns how two copies of a log first differ, or nil.
func diffLogs(a, b []diskRecord) error {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		if x.offset != y.offset || x.generation != y.generation || x.kind != y.kind || !bytes.Equal(x.payload, y.payload) {
			return fmt.Errorf("record %d: offset %d gen %d kind %v %q vs offset %d gen %d kind %v %q",
				i, x.offset, x.generation, x.kind, x.payload, y.offset, y.generation, y.kind, y.payload)
		}
	}
	if len(a) != len(b) {
		return fmt.Errorf("%d records vs %d", len(a), len(b))
	}
	return nil
}

// waitSameLogs waits until every node's copy of stream's shard 0 is the
// same, and checks that the records at gaps are generation starts.
func (d *devCluster) waitSameLogs(stream string, gaps []uint64) []diskRecord {
	d.t.Helper()
	var (
		logs [][]diskRecord
		err  error
	)
	deadline := time.Now().Add(15 * time.Second)
	for {
		logs, err = d.sameLogs(stream)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		d.t.Fatalf("the copies of %s never became equal: %v", stream, err)
	}
	kinds := map[uint64]flog.Kind{}
	for _, r := range logs[0] {
		kinds[r.offset] = r.kind
	}
	for _, g := range gaps {
		if kinds[g] != flog.KindGenerationStart {
			d.t.Errorf("offset %d, a gap in what readers see, holds a record of kind %v on disk, want a generation start", g, kinds[g])
		}
	}
	return logs[0]
}

// The replication tests (#18): durable streams with a
// replication factor above 1 across a real cluster started with felix
// dev. A shard's leader ships its log to its followers; the tests compare
// every node's copy on disk, record by record, and check what a Quorum
// or a Leader stream acknowledges while followers are down.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"

	flog "github.com/felixmq/felix/log"
)

// replWait bounds how long a follower may take to hold what its leader
// holds (a restarted one included) on a loaded machine.
const replWait = 30 * time.Second

// replicaSet is one shard's copies: its leader's node and its
// followers', and the generation the leader was given the shard at.
type replicaSet struct {
	leader     string
	followers  []string
	generation uint64
}

// nodes lists the leader first, then the followers.
func (rs replicaSet) nodes() []string { return append([]string{rs.leader}, rs.followers...) }

// createReplicated creates a durable stream name with shards shards,
// replication factor rf and consistency, and returns each shard's replica
// set once every shard has a serving owner and rf-1 followers.
func (d *devCluster) createReplicated(ctx context.Context, name string, shards, rf int, consistency string) []replicaSet {
	d.t.Helper()
	d.mustFelix(ctx, "admin", "stream", "create", name, "--durable", "--shards", fmt.Sprint(shards),
		"--replication-factor", fmt.Sprint(rf), "--consistency", consistency)
	var v wire.PlacementView
	eventually(d.t, expiryWait, name+" placed with its followers", func() bool {
		v = d.placement(ctx, name)
		if len(v.Shards) != shards || owners(v)[""] != 0 {
			return false
		}
		for _, a := range v.Shards {
			if len(a.Replicas) != rf-1 {
				return false
			}
		}
		return true
	})
	sets := make([]replicaSet, shards)
	for _, a := range v.Shards {
		rs := replicaSet{leader: nodeNameOf(a.NodeID), generation: a.Generation}
		for _, r := range a.Replicas {
			if r.NodeID == a.NodeID {
				d.t.Fatalf("shard %d: its leader %s is also its follower: %+v", a.Shard, a.NodeID, a)
			}
			rs.followers = append(rs.followers, nodeNameOf(r.NodeID))
		}
		sets[a.Shard] = rs
	}
	d.t.Logf("%s: replica sets {leader [followers] generation}: %v", name, sets)
	return sets
}

// storedRecord is one record of a shard's log as a node's disk holds it.
type storedRecord struct {
	Offset     uint64
	Kind       flog.Kind
	Generation uint64
	TimeMicros uint64
	Payload    string
}

// replicaDir is the directory of one shard's log of the stream in a
// node's data directory (core.ShardDir under <data-dir>/log), the same on
// its leader and its followers.
func (d *devCluster) replicaDir(name, stream string, shard uint32) string {
	k := core.StreamKey{Tenant: d.client.Tenant, Namespace: d.client.Namespace, Stream: stream}
	return core.ShardDir(filepath.Join(d.node(name).DataDir, "log"), k, shard)
}

// shardCopy reads a node's copy of one shard's log straight from its
// disk (log.ScanRecords writes nothing, so the node may be running).
func (d *devCluster) shardCopy(name, stream string, shard uint32) ([]storedRecord, error) {
	dir := d.replicaDir(name, stream, shard)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no copy yet
	}
	var recs []storedRecord
	rep, err := flog.ScanRecords(dir, func(ri flog.RecordInfo) error {
		recs = append(recs, storedRecord{Offset: ri.Offset, Kind: ri.Kind, Generation: ri.Generation,
			TimeMicros: ri.TimeMicros, Payload: string(ri.Payload)})
		return nil
	})
	if err == nil && rep.Corrupt != nil {
		err = rep.Corrupt
	}
	return recs, err
}

// copiesDiffer says how the copies of a shard on nodes (the leader first)
// differ from the leader's, or how the leader's lacks an acknowledged
// record; "" when every copy equals the leader's and holds every record
// of acked (offset → payload).
func (d *devCluster) copiesDiffer(stream string, shard uint32, nodes []string, acked map[uint64]string) string {
	copies := make([][]storedRecord, len(nodes))
	for i, name := range nodes {
		recs, err := d.shardCopy(name, stream, shard)
		if err != nil {
			return fmt.Sprintf("%s's copy: %v", name, err)
		}
		copies[i] = recs
	}
	byOffset := map[uint64]string{}
	for _, r := range copies[0] {
		byOffset[r.Offset] = r.Payload
	}
	for off, p := range acked {
		if got, ok := byOffset[off]; !ok || got != p {
			return fmt.Sprintf("leader %s holds %q at acknowledged offset %d (present %v), want %q", nodes[0], got, off, ok, p)
		}
	}
	for i, name := range nodes[1:] {
		c := copies[i+1]
		if len(c) != len(copies[0]) {
			return fmt.Sprintf("%s holds %d records, leader %s %d", name, len(c), nodes[0], len(copies[0]))
		}
		for j := range c {
			if c[j] != copies[0][j] {
				return fmt.Sprintf("record %d: %s holds %+v, leader %s %+v", j, name, c[j], nodes[0], copies[0][j])
			}
		}
	}
	return ""
}

// waitCopiesEqual waits until every copy of the shard in rs equals the
// leader's and holds every acknowledged record, then checks the leader's
// copy: offsets contiguous from its first, every payload once, every
// record stamped with the leader's generation. It returns the leader's
// copy.
func (d *devCluster) waitCopiesEqual(stream string, shard uint32, rs replicaSet, acked map[uint64]string) []storedRecord {
	d.t.Helper()
	nodes := rs.nodes()
	var why string
	deadline := time.Now().Add(replWait)
	for why = d.copiesDiffer(stream, shard, nodes, acked); why != ""; why = d.copiesDiffer(stream, shard, nodes, acked) {
		if time.Now().After(deadline) {
			d.t.Fatalf("shard %d of %s: copies on %v still differ after %v: %s", shard, stream, nodes, replWait, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
	recs, err := d.shardCopy(nodes[0], stream, shard)
	if err != nil {
		d.t.Fatal(err)
	}
	seen := map[string]uint64{}
	for i, r := range recs {
		if i > 0 && r.Offset != recs[i-1].Offset+1 {
			d.t.Fatalf("shard %d of %s: offset %d follows %d", shard, stream, r.Offset, recs[i-1].Offset)
		}
		if r.Generation != rs.generation {
			d.t.Fatalf("shard %d of %s: offset %d has generation %d, the leader's is %d", shard, stream, r.Offset, r.Generation, rs.generation)
		}
		if r.Kind != flog.KindData {
			continue
		}
		if prev, dup := seen[r.Payload]; dup {
			d.t.Fatalf("shard %d of %s: %q stored at offsets %d and %d", shard, stream, r.Payload, prev, r.Offset)
		}
		seen[r.Payload] = r.Offset
	}
	return recs
}

// waitNoLag waits until the node ships to two followers and reports
// none of them behind (felix_replication_lag_records_max 0).
func (d *devCluster) waitNoLag(leader string) {
	d.t.Helper()
	eventually(d.t, replWait, leader+" to report its two followers caught up", func() bool {
		followers, err1 := d.metric(leader, "felix_replication_followers")
		lag, err2 := d.metric(leader, "felix_replication_lag_records_max")
		return err1 == nil && err2 == nil && followers == 2 && lag == 0
	})
}

// mustPublish publishes payload on c and records it in acked at its
// offset. A refusal that says nothing was written (retry class retry,
// such as shard_unavailable while the leader's lease lapses during a
// control-plane election) is sent again; any other error, or no
// acknowledgement within replWait, fails the test. It returns how many
// times the publish was refused, and the last refusal.
func mustPublish(ctx context.Context, t *testing.T, c *felix.Client, stream, payload string, acked map[uint64]string) (int, error) {
	t.Helper()
	deadline := time.Now().Add(replWait)
	var last error
	for refused := 0; ; refused++ {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		res, err := c.PublishAcked(pctx, "default", stream, []byte(payload), felix.AckPerMessage)
		cancel()
		var be *felix.BrokerError
		switch {
		case err == nil && !res.HasOffset:
			t.Fatalf("publish %s: acknowledged without an offset", payload)
		case err == nil:
			if prev, dup := acked[res.Offset]; dup {
				t.Fatalf("publish %s acknowledged at offset %d, already %q's", payload, res.Offset, prev)
			}
			acked[res.Offset] = payload
			return refused, last
		case errors.As(err, &be) && be.Retry.Retryable() && time.Now().Before(deadline):
			last = err
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("publish %s (refused %d times before): %v", payload, refused, err)
		}
	}
}

// publishAll publishes n payloads prefix-0, prefix-1, ... with
// mustPublish, gap apart, and logs how many refusals it retried.
func publishAll(ctx context.Context, t *testing.T, c *felix.Client, stream, prefix string, n int, gap time.Duration, acked map[uint64]string) {
	t.Helper()
	refused := 0
	var last error
	for i := range n {
		r, err := mustPublish(ctx, t, c, stream, fmt.Sprintf("%s-%d", prefix, i), acked)
		if r > 0 {
			refused, last = refused+r, err
		}
		time.Sleep(gap)
	}
	if refused > 0 {
		t.Logf("%s: %d refusals retried, the last %v", prefix, refused, last)
	}
}

// A durable two-shard stream with three copies and consistency quorum:
// every acknowledged record ends up on its leader and both followers,
// at the same offset with the same payload and time, once each, in
// order.
func TestAReplicatedStreamIsCopiedToEveryNode(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sets := d.createReplicated(ctx, "orders", 2, 3, "quorum")
	cc := d.connectCluster(ctx, d.adminToken())
	acked := []map[uint64]string{{}, {}}
	for i := range 300 {
		shard := uint32(i % 2)
		payload := fmt.Sprintf("order-%d", i)
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := cc.PublishKeyedAcked(pctx, "default", "orders", keyForShard(shard, 2), []byte(payload), felix.AckPerMessage)
		pcancel()
		if err != nil || !res.HasOffset {
			t.Fatalf("publish %s: %+v, %v", payload, res, err)
		}
		acked[shard][res.Offset] = payload
	}
	for shard, rs := range sets {
		recs := d.waitCopiesEqual("orders", uint32(shard), rs, acked[shard])
		if len(recs) != len(acked[shard]) {
			t.Fatalf("shard %d holds %d records, %d were acknowledged", shard, len(recs), len(acked[shard]))
		}
	}
	// The brokers count two followers and two replicas (one of each
	// shard's followers per node but the leaders'), 300 records applied
	// twice, and no lag.
	sum := func(name string) float64 {
		var total float64
		for _, n := range d.nodes {
			v, err := d.metric(n.Name, name)
			if err != nil {
				t.Fatalf("%s's metrics: %v", n.Name, err)
			}
			total += v
		}
		return total
	}
	eventually(t, replWait, "the replication metrics to agree", func() bool {
		return sum("felix_replication_followers") == 4 && sum("felix_replication_replicas") == 4 &&
			sum("felix_replication_shipped_records_total") == 600 && sum("felix_replication_applied_records_total") == 600 &&
			sum("felix_replication_lag_records_max") == 0
	})
}

// publishRefused publishes payload once, expecting it not to be
// acknowledged: it returns the error's code, failing the test on an
// acknowledgement or an answer later than within.
func publishRefused(ctx context.Context, t *testing.T, c *felix.Client, stream, payload string, within time.Duration) wire.Code {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	res, err := c.PublishAcked(pctx, "default", stream, []byte(payload), felix.AckPerMessage)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("publish %s acknowledged at offset %d with no majority up", payload, res.Offset)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish %s unanswered after %v", payload, took)
	}
	t.Logf("publish %s refused after %v: %v", payload, took, err)
	return brokerCode(err)
}

// A one-shard quorum stream with three copies acknowledges publishes
// while one follower is down (the leader and the other follower are a
// majority) and catches the follower up when it returns; with both
// followers down a publish is refused within the quorum timeout; once
// they return, every record acknowledged in the test is on all three
// copies exactly once, in offset order.
func TestAQuorumStreamAcksWithOneFollowerDownAndCatchesItUp(t *testing.T) {
	d := startDev(t, 3, "FELIX_PUBLISH_QUORUM_TIMEOUT_MS=1500")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs := d.createReplicated(ctx, "pay", 1, 3, "quorum")[0]
	c := d.connect(ctx, rs.leader, d.adminToken())
	acked := map[uint64]string{}
	publishAll(ctx, t, c, "pay", "before", 20, 0, acked)

	down := rs.followers[0]
	d.kill9(down)
	publishAll(ctx, t, c, "pay", "one-down", 30, 100*time.Millisecond, acked)
	d.restart(down)
	d.waitCopiesEqual("pay", 0, rs, acked)

	// Both followers down: no majority holds a publish.
	d.kill9(rs.followers[0])
	d.kill9(rs.followers[1])
	unknown := map[string]bool{"no-majority": true} // refused: outcome unknown
	// The leader's lease may lapse first (two of the control plane's three
	// voters are down): then the shard is unavailable.
	switch code := publishRefused(ctx, t, c, "pay", "no-majority", 8*time.Second); code {
	case wire.CodeQuorumTimeout:
		if n, err := d.metric(rs.leader, "felix_publish_quorum_timeouts_total"); n != 1 {
			t.Fatalf("%s counts %v quorum timeouts (%v), want 1", rs.leader, n, err)
		}
	case wire.CodeShardUnavailable:
	default:
		t.Fatalf("publish with no majority refused with code %q, want quorum_timeout or shard_unavailable", code)
	}
	d.restart(rs.followers[0])
	d.restart(rs.followers[1])

	// A new publish is acknowledged again (each try is a new payload:
	// a refused one's outcome is unknown).
	var lastErr error
	refused := 0
	eventually(t, expiryWait, "a publish acknowledged after the followers returned", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		payload := fmt.Sprintf("after-%d", refused)
		res, err := c.PublishAcked(pctx, "default", "pay", []byte(payload), felix.AckPerMessage)
		if err != nil {
			lastErr = err
			unknown[payload] = true
			refused++
			return false
		}
		acked[res.Offset] = payload
		return true
	})
	t.Logf("%d publishes refused after the followers returned, the last with %v", refused, lastErr)
	// Every stored record was acknowledged, or refused with its outcome
	// unknown.
	recs := d.waitCopiesEqual("pay", 0, rs, acked)
	for _, r := range recs {
		if r.Kind == flog.KindData && acked[r.Offset] != r.Payload && !unknown[r.Payload] {
			t.Fatalf("offset %d holds %q: neither acknowledged there nor refused", r.Offset, r.Payload)
		}
	}
	t.Logf("%d records stored, %d acknowledged", len(recs), len(acked))
	d.waitNoLag(rs.leader)
}

// A one-shard stream with three copies and consistency leader
// acknowledges publishes on its leader's write alone, with both followers
// down, and the followers catch up when they return. Five nodes, so that
// the control plane keeps a majority of its voters with two down and the
// leader keeps its lease.
func TestALeaderConsistencyStreamAcksWithoutFollowers(t *testing.T) {
	d := startDev(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs := d.createReplicated(ctx, "clicks", 1, 3, "leader")[0]
	c := d.connect(ctx, rs.leader, d.adminToken())
	acked := map[uint64]string{}
	publishAll(ctx, t, c, "clicks", "before", 20, 0, acked)
	d.waitCopiesEqual("clicks", 0, rs, acked)

	d.kill9(rs.followers[0])
	d.kill9(rs.followers[1])
	publishAll(ctx, t, c, "clicks", "alone", 30, 100*time.Millisecond, acked)
	d.restart(rs.followers[0])
	d.restart(rs.followers[1])
	recs := d.waitCopiesEqual("clicks", 0, rs, acked)
	if len(recs) != len(acked) {
		t.Fatalf("%d records stored, %d acknowledged", len(recs), len(acked))
	}
	d.waitNoLag(rs.leader)
}

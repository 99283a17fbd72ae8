package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// heldGate is a Replication whose committed mark the test moves.
type heldGate struct {
	mu        sync.Mutex
	committed uint64
	appended  []uint64
	changed   chan struct{}
}

func newHeldGate() *heldGate { return &heldGate{changed: make(chan struct{})} }

func (g *heldGate) Appended(next uint64) {
	g.mu.Lock()
	g.appended = append(g.appended, next)
	g.mu.Unlock()
}

func (g *heldGate) WaitCommitted(ctx context.Context, end uint64) error {
	for {
		g.mu.Lock()
		ok, ch := g.committed >= end, g.changed
		g.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (g *heldGate) Committed() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.committed
}

func (g *heldGate) commit(off uint64) {
	g.mu.Lock()
	g.committed = off
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

func TestAQuorumShardDeliversOnlyWhatAMajorityHolds(t *testing.T) {
	gate := newHeldGate()
	cfg := Config{PlacedShards: true, Storage: &StorageConfig{Dir: t.TempDir()},
		ReplicationFor: func(StreamKey, uint32) Replication { return gate }}
	b := NewBroker(cfg)
	t.Cleanup(b.Close)
	spec := wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Durable: true}
	if err := b.ApplyStream(spec); err != nil {
		t.Fatal(err)
	}
	k := StreamKey{"t", "ns", "s"}
	if err := b.OpenStreamShard(k, 0, 1); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(0)
	sub, err := sh.Subscribe(SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartEarliest}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	c, err := sh.Claim([][]byte{[]byte("a"), []byte("b")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.EndOffset() != 2 || c.Durable() {
		t.Fatalf("end %d durable %v before the majority holds it", c.EndOffset(), c.Durable())
	}
	done := make(chan error, 1)
	go func() { done <- c.Finish(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("finished before a majority held it: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if recs, _, err := sh.Read(0, 10, 10, 0); err != nil || len(recs) != 0 {
		t.Fatalf("read served uncommitted records: %d %v", len(recs), err)
	}
	// The leader's shipping sees them at once.
	if recs, _, err := sh.ReadLog(0, 10, 10, 0); err != nil || len(recs) != 2 {
		t.Fatalf("ReadLog: %d %v", len(recs), err)
	}
	gate.commit(2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if recs, _, err := sh.Read(0, 10, 10, 0); err != nil || len(recs) != 2 {
		t.Fatalf("read after commit: %d %v", len(recs), err)
	}
	gate.mu.Lock()
	got := gate.appended
	gate.mu.Unlock()
	if len(got) != 1 || got[0] != 2 {
		t.Fatalf("Appended calls %v, want [2]", got)
	}

	// A claim given up while it waits for the majority abandons the shard.
	c2, err := sh.Claim([][]byte{[]byte("c")}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var we *wire.Error
	if err := c2.Finish(ctx); !errors.As(err, &we) || we.Retry != wire.RetryOutcomeUnknown {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestAReplicaCopiesTheLeadersRecordsAndBecomesTheShard(t *testing.T) {
	// The leader: an ordinary log with a few records of two kinds.
	src, _, err := flog.Open(flog.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.AppendAt([][]byte{[]byte("a"), []byte("b"), []byte("c")}, "alice", 1_000); err != nil {
		t.Fatal(err)
	}
	if _, err := src.AppendEntries([]flog.Entry{{Kind: flog.KindGenerationStart, Generation: 7}}, "", 2_000); err != nil {
		t.Fatal(err)
	}
	if _, err := src.AppendAt([][]byte{[]byte("d")}, "bob", 3_000); err != nil {
		t.Fatal(err)
	}
	recs, _, err := src.Read(0, 10, 10, 0)
	if err != nil || len(recs) != 5 {
		t.Fatalf("read %d %v", len(recs), err)
	}

	dir := t.TempDir()
	b, k := newPlacedBroker(t, dir, wire.StreamSpec{Durable: true, Shards: 2})
	r, err := b.OpenStreamReplica(k, 1)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.OpenStreamReplica(k, 1); err != nil || again != r {
		t.Fatalf("second open: %v", err)
	}
	// A batch past the replica's next offset is refused, nothing written.
	var gap *OffsetGapError
	if _, _, err := r.Append(context.Background(), 0, recs[2:]); !errors.As(err, &gap) || gap.Want != 0 || gap.Got != 2 {
		t.Fatalf("gap: %v", err)
	}
	if next, durable, err := r.Append(context.Background(), 0, recs[:3]); err != nil || next != 3 || durable != 3 {
		t.Fatalf("append: %d %d %v", next, durable, err)
	}
	// A re-send overlapping what the replica holds writes only the rest.
	if next, _, err := r.Append(context.Background(), 0, recs[1:]); err != nil || next != 5 {
		t.Fatalf("overlapping append: %d %v", next, err)
	}
	if next, _, err := r.Append(context.Background(), 0, recs[:2]); err != nil || next != 5 {
		t.Fatalf("a re-send of held records: %d %v", next, err)
	}
	// A shard open here as its leader refuses a replica, and the other way
	// round the replica gives way to the shard (a promotion).
	if err := b.OpenStreamShard(k, 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OpenStreamReplica(k, 0); err == nil {
		t.Fatal("a replica opened over the shard's leader")
	}
	if err := b.OpenStreamShard(k, 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.StreamReplica(k, 1); ok {
		t.Fatal("the replica stayed open beside the promoted shard")
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(1)
	got, _, err := sh.Read(0, 10, 10, 0)
	if err != nil || len(got) != 5 {
		t.Fatalf("promoted shard reads %d %v", len(got), err)
	}
	for i, g := range got {
		w := recs[i]
		if g.Offset != w.Offset || g.TimeMicros != w.TimeMicros || g.Publisher != w.Publisher || g.Kind != w.Kind ||
			g.Generation != w.Generation || string(g.Payload) != string(w.Payload) {
			t.Fatalf("record %d: %+v, want %+v", i, g, w)
		}
	}
}

func TestAReplicaHoldsItsLogUntilTheLeaderCommits(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{PlacedShards: true, Storage: &StorageConfig{Dir: dir, SegmentBytes: 256,
		Retention: flog.Retention{MaxBytes: 1}}}
	b := NewBroker(cfg)
	t.Cleanup(b.Close)
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Durable: true}); err != nil {
		t.Fatal(err)
	}
	k := StreamKey{"t", "ns", "s"}
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 { // one batch per record: a batch never spans segments
		rec := flog.Record{Offset: uint64(i), TimeMicros: 1, Payload: make([]byte, 64)}
		if _, _, err := r.Append(context.Background(), 0, []flog.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	b.ApplyRetention()
	if r.StartOffset() != 0 {
		t.Fatalf("retention ran before the leader named its committed mark: start %d", r.StartOffset())
	}
	r.SetCommitted(20)
	b.ApplyRetention()
	if s := r.StartOffset(); s == 0 || s > 20 {
		t.Fatalf("start %d after a commit at 20", s)
	}
}

func TestALeadersRecordsCarryItsGeneration(t *testing.T) {
	b, k := newPlacedBroker(t, t.TempDir(), wire.StreamSpec{Durable: true})
	if err := b.OpenStreamShard(k, 0, 4); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(0)
	if _, err := sh.publishDurable(context.Background(), [][]byte{[]byte("a")}, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.OpenStreamShard(k, 0, 9); err != nil { // the same broker, a new generation
		t.Fatal(err)
	}
	if _, err := sh.publishDurable(context.Background(), [][]byte{[]byte("b")}, ""); err != nil {
		t.Fatal(err)
	}
	recs, _, err := sh.ReadLog(0, 2, 2, 0)
	if err != nil || len(recs) != 2 || recs[0].Generation != 4 || recs[1].Generation != 9 {
		t.Fatalf("generations %+v %v", recs, err)
	}
}

func TestAFencedReplicaRefusesAnOlderLeaderAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	b, k := newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(off, gen uint64) []flog.Record {
		return []flog.Record{{Offset: off, Generation: gen, TimeMicros: 1, Payload: []byte("x")}}
	}
	if _, _, err := r.Append(context.Background(), 1, rec(0, 1)); err != nil {
		t.Fatal(err)
	}
	next, last, err := r.Fence(3)
	if err != nil || next != 1 || last != 1 {
		t.Fatalf("fence: next %d last generation %d %v", next, last, err)
	}
	var we *wire.Error
	if _, _, err := r.Append(context.Background(), 2, rec(1, 2)); !errors.As(err, &we) || we.Detail[wire.DetailReason] != "stale_generation" {
		t.Fatalf("an older leader's records: %v", err)
	}
	if _, _, err := r.Fence(2); !errors.As(err, &we) {
		t.Fatalf("an older fence: %v", err)
	}
	if _, _, err := r.Append(context.Background(), 3, rec(1, 3)); err != nil {
		t.Fatal(err)
	}
	// Reopened, it still refuses generation 2 and can be cut back.
	b.CloseStreamReplica(k, 0)
	r, err = b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fenced() != 3 {
		t.Fatalf("fence after reopen %d", r.Fenced())
	}
	if _, _, err := r.Append(context.Background(), 2, rec(2, 2)); err == nil {
		t.Fatal("an older leader's records taken after a reopen")
	}
	if g, err := r.GenerationBefore(2); err != nil || g != 3 {
		t.Fatalf("generation before 2: %d %v", g, err)
	}
	if err := r.TruncateTo(1); err != nil || r.NextOffset() != 1 {
		t.Fatalf("truncate: %v next %d", err, r.NextOffset())
	}
	if recs, _, err := r.Read(0, 5, 5, 0); err != nil || len(recs) != 1 || recs[0].Generation != 1 {
		t.Fatalf("read %+v %v", recs, err)
	}
}

func TestAGenerationStartIsSkippedAndCounted(t *testing.T) {
	b, k := newPlacedBroker(t, t.TempDir(), wire.StreamSpec{Durable: true})
	sh := func() *Shard { st, _ := b.Stream(k); s, _ := st.Shard(0); return s }
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	recs := []flog.Record{
		{Offset: 0, Generation: 1, TimeMicros: 1, Payload: []byte("a")},
		{Offset: 1, Generation: 2, TimeMicros: 2, Kind: flog.KindGenerationStart},
		{Offset: 2, Generation: 2, TimeMicros: 3, Payload: []byte("b")},
	}
	if _, _, err := r.Append(context.Background(), 2, recs); err != nil {
		t.Fatal(err)
	}
	if err := b.OpenStreamShard(k, 0, 2); err != nil {
		t.Fatal(err)
	}
	got, _, err := sh().Read(0, 10, 10, 0)
	if err != nil || len(got) != 3 {
		t.Fatalf("read %d %v", len(got), err)
	}
	envs := sh().RecordEnvelopes(got)
	if len(envs) != 2 || envs[0].BaseOffset != 0 || envs[0].SkippedBefore != 0 || envs[1].BaseOffset != 2 || envs[1].SkippedBefore != 1 {
		t.Fatalf("envelopes %+v %+v", envs[0], envs[len(envs)-1])
	}
	// A conditional writer's expected offset counts the generation start.
	if _, err := sh().ClaimIf([][]byte{[]byte("c")}, "", 2); err == nil {
		t.Fatal("a write expecting offset 2 was taken after the generation start")
	}
}

// The first batch a new leader publishes after its generation start
// carries skipped_before 1, as a replay from the log would: a subscriber
// fed from the replay ring learns of the offset that holds no event.
func TestTheFirstBatchAfterAGenerationStartCountsIt(t *testing.T) {
	b, k := newPlacedBroker(t, t.TempDir(), wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Append(context.Background(), 1, []flog.Record{{Offset: 0, Generation: 1, TimeMicros: 1, Payload: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if err := b.OpenStreamShardAsNewLeader(k, 0, 2); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(0)
	for i, want := range []uint64{1, 0} {
		c, err := sh.Claim([][]byte{[]byte("b")}, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Finish(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c.BaseOffset() != uint64(2+i) || c.env.SkippedBefore != want {
			t.Fatalf("batch %d at offset %d skipped %d before it, want offset %d and %d", i, c.BaseOffset(), c.env.SkippedBefore, 2+i, want)
		}
	}
}

func TestASkipAtTheEndOfAPageIsCountedOnTheNext(t *testing.T) {
	b, k := newPlacedBroker(t, t.TempDir(), wire.StreamSpec{Durable: true})
	if err := b.OpenStreamShard(k, 0, 1); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(0)
	page1 := []flog.Record{{Offset: 0, Payload: []byte("a")}, {Offset: 1, Kind: flog.KindGenerationStart}}
	page2 := []flog.Record{{Offset: 2, Payload: []byte("b")}}
	envs, trailing := sh.RecordEnvelopesAfter(page1, 0)
	if len(envs) != 1 || trailing != 1 {
		t.Fatalf("page 1: %d envelopes, trailing %d", len(envs), trailing)
	}
	envs, trailing = sh.RecordEnvelopesAfter(page2, trailing)
	if len(envs) != 1 || envs[0].SkippedBefore != 1 || trailing != 0 {
		t.Fatalf("page 2: %+v trailing %d", envs, trailing)
	}
}

// TestADuplicateRebuiltAtATakeoverWaitsForTheMajority: a shard reopened
// by a new leader answers a re-send of a batch written under the earlier
// leadership (its table rebuilt from the log) only once a majority holds
// the new generation's start, and a re-send of a batch this leadership
// wrote waits for that batch's own claim.
func TestADuplicateRebuiltAtATakeoverWaitsForTheMajority(t *testing.T) {
	gate := newHeldGate()
	cfg := Config{PlacedShards: true, Storage: &StorageConfig{Dir: t.TempDir()},
		ReplicationFor: func(StreamKey, uint32) Replication { return gate }}
	b := NewBroker(cfg)
	t.Cleanup(b.Close)
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Durable: true}); err != nil {
		t.Fatal(err)
	}
	k := StreamKey{"t", "ns", "s"}
	if err := b.OpenStreamShard(k, 0, 1); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(0)
	batch := [][]byte{[]byte("a"), []byte("b")}
	gate.commit(2)
	if off, err := sh.PublishIdempotent(context.Background(), batch, "", 7, 0); err != nil || off != 0 {
		t.Fatalf("first copy: %d %v", off, err)
	}
	b.CloseStreamShard(k, 0, nil)
	// A new leader at generation 2: its generation start takes offset 2.
	if err := b.OpenStreamShardAsNewLeader(k, 0, 2); err != nil {
		t.Fatal(err)
	}
	sh, _ = st.Shard(0)
	c, err := sh.ClaimIdempotent(batch, "", 7, 0)
	if err != nil || !c.Duplicate() || c.BaseOffset() != 0 {
		t.Fatalf("re-send: %+v %v", c, err)
	}
	if c.CommitEnd() != 3 || c.Durable() {
		t.Fatalf("commit end %d durable %v before a majority holds the generation start", c.CommitEnd(), c.Durable())
	}
	done := make(chan error, 1)
	go func() { done <- c.Finish(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("answered before a majority held the generation start: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	gate.commit(3)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The next sequence is this leadership's own; its re-send waits on it.
	c1, err := sh.ClaimIdempotent([][]byte{[]byte("c")}, "", 7, 1)
	if err != nil || c1.Duplicate() || c1.BaseOffset() != 3 {
		t.Fatalf("sequence 1: %+v %v", c1, err)
	}
	d, err := sh.ClaimIdempotent([][]byte{[]byte("c")}, "", 7, 1)
	if err != nil || !d.Duplicate() || d.CommitEnd() != 0 || d.BaseOffset() != 3 {
		t.Fatalf("re-send of sequence 1: %+v %v", d, err)
	}
	gate.commit(4)
	if err := c1.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Failovers in a row leave generation starts with no event between them:
// the first batch of the last leader counts them all, so a subscriber
// whose replay from the log ended on them (and left them out) learns of
// every offset that holds no event, not only the last leader's own.
func TestTheFirstBatchAfterGenerationStartsInARowCountsThemAll(t *testing.T) {
	b, k := newPlacedBroker(t, t.TempDir(), wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	recs := []flog.Record{
		{Offset: 0, Generation: 1, TimeMicros: 1, Payload: []byte("a")},
		{Offset: 1, Generation: 2, TimeMicros: 2, Kind: flog.KindGenerationStart},
		{Offset: 2, Generation: 3, TimeMicros: 3, Kind: flog.KindGenerationStart},
	}
	if _, _, err := r.Append(context.Background(), 3, recs); err != nil {
		t.Fatal(err)
	}
	if err := b.OpenStreamShardAsNewLeader(k, 0, 4); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(0)
	c, err := sh.Claim([][]byte{[]byte("b")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.BaseOffset() != 4 || c.env.SkippedBefore != 3 {
		t.Fatalf("the first batch at offset %d skipped %d before it, want offset 4 and 3 (three generation starts)", c.BaseOffset(), c.env.SkippedBefore)
	}
	got, _, err := sh.Read(0, 10, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	envs := sh.RecordEnvelopes(got)
	if last := envs[len(envs)-1]; last.BaseOffset != 4 || last.SkippedBefore != 3 {
		t.Fatalf("a replay from the log says offset %d skipped %d: the live batch must agree", last.BaseOffset, last.SkippedBefore)
	}
}

// waitingShipment reports whether a shipment waits for the copy's end to
// move (Shipment.AwaitPrior).
func waitingShipment(r *Replica) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grown != nil
}

func TestAShipmentAheadOfItsPredecessorWaitsForIt(t *testing.T) {
	b, k := newPlacedBroker(t, t.TempDir(), wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]flog.Record, 6)
	for i := range recs {
		recs[i] = flog.Record{Offset: uint64(i), TimeMicros: 1, Generation: 1, Payload: []byte{byte(i)}}
	}
	ctx := context.Background()
	ship := func(from int, to int, await time.Duration) (uint64, error) {
		prev := uint64(1)
		if from == 0 {
			prev = 0
		}
		next, _, err := r.Ship(ctx, Shipment{Generation: 1, From: uint64(from), PrevGeneration: prev,
			Records: recs[from:to], AwaitPrior: await})
		return next, err
	}
	// The second shipment arrives first: it waits for the first, which
	// then lets it through; the copy holds both, in order.
	type result struct {
		next uint64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		next, err := ship(3, 6, time.Minute)
		done <- result{next, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !waitingShipment(r) {
		if time.Now().After(deadline) {
			t.Fatal("the shipment ahead of its predecessor did not wait")
		}
		time.Sleep(time.Millisecond)
	}
	if next, err := ship(0, 3, 0); err != nil || next < 3 {
		t.Fatalf("first shipment: %d %v", next, err)
	}
	if res := <-done; res.err != nil || res.next != 6 {
		t.Fatalf("the shipment that waited: %+v", res)
	}
	got, _, err := r.Read(0, 10, 10, 0)
	if err != nil || len(got) != 6 {
		t.Fatalf("copy: %d records, %v", len(got), err)
	}
	for i := range got {
		if got[i].Offset != uint64(i) || got[i].Payload[0] != byte(i) {
			t.Fatalf("record %d: %+v", i, got[i])
		}
	}
	// With no predecessor coming, the wait ends in a gap refusal that
	// names where the copy ends, nothing written.
	more := flog.Record{Offset: 8, TimeMicros: 1, Generation: 1, Payload: []byte{8}}
	var gap *OffsetGapError
	if _, _, err := r.Ship(ctx, Shipment{Generation: 1, From: 8, PrevGeneration: 1, Records: []flog.Record{more},
		AwaitPrior: time.Millisecond}); !errors.As(err, &gap) || gap.Want != 6 {
		t.Fatalf("a shipment whose predecessor never came: %v", err)
	}
	// A fence to a newer leader ends a wait of an older one's shipment.
	go func() {
		_, _, err := r.Ship(ctx, Shipment{Generation: 1, From: 8, PrevGeneration: 1, Records: []flog.Record{more}, AwaitPrior: time.Minute})
		done <- result{err: err}
	}()
	for !waitingShipment(r) {
		if time.Now().After(deadline) {
			t.Fatal("the second shipment did not wait")
		}
		time.Sleep(time.Millisecond)
	}
	if _, _, err := r.Fence(2); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err == nil {
		t.Fatal("an older leader's shipment went through a fence")
	}
	if r.NextOffset() != 6 {
		t.Fatalf("copy ends at %d, want 6", r.NextOffset())
	}
}

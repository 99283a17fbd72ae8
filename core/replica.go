package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// Replication is what a durable shard's leader consults about its
// followers (the broker's log shipping implements it; core knows no
// peers). Config.ReplicationFor hands one to each durable shard when it
// opens.
type Replication interface {
	// Appended tells the shipping that the shard's log now ends at next.
	// It is called under the shard's claim lock and must not block.
	Appended(next uint64)
	// WaitCommitted returns once the shard may deliver and acknowledge
	// every record below end: at once on a shard acknowledged after the
	// leader's own write (Leader consistency), once a majority of the
	// replica set, the leader included, holds them on a Quorum shard. It
	// returns ctx's error when ctx ends first, and an error when the
	// shard stopped leading.
	WaitCommitted(ctx context.Context, end uint64) error
	// Committed is the mark WaitCommitted waits for: every record below
	// it is held by a majority. Retention keeps everything from it.
	// flog.NoRetentionFloor when the shard holds nothing back (Leader
	// consistency).
	Committed() uint64
}

// EndOffset returns one past the batch's last record; 0 for a duplicate
// (nothing was written: Finish waits for the first copy).
func (c *Claimed) EndOffset() uint64 {
	if c.dup {
		return 0
	}
	return c.env.EndOffset()
}

// CommitEnd is the offset a Quorum leader waits for a majority to hold
// before it answers the claim: the batch's end; for a duplicate of a
// batch the shard's table was rebuilt with from its log (written before
// a restart, or under an earlier leadership and copied or fetched by this
// one), the first copy's end or the new generation's start, whichever is
// later; 0 for a duplicate of a batch this leadership wrote (its own
// claim waits).
func (c *Claimed) CommitEnd() uint64 {
	if c.dup {
		return c.dupEnd
	}
	return c.env.EndOffset()
}

// ReadLog returns the records of the shard's log in [from, end), written
// but not necessarily durable or committed: what a leader ships to its
// followers. Read is what clients are served; this is not.
func (sh *Shard) ReadLog(from, end uint64, maxRecords, maxBytes int) ([]flog.Record, uint64, error) {
	if sh.log == nil {
		return nil, from, errNotDurable(sh)
	}
	return sh.log.Read(from, end, maxRecords, maxBytes)
}

// LogNextOffset is the offset the shard's log gives its next record (0 on
// an in-memory shard).
func (sh *Shard) LogNextOffset() uint64 {
	if sh.log == nil {
		return 0
	}
	return sh.log.NextOffset()
}

// LogDurableOffset is one past the last record the shard's log holds
// under its fsync policy (0 on an in-memory shard).
func (sh *Shard) LogDurableOffset() uint64 {
	if sh.log == nil {
		return 0
	}
	return sh.log.DurableOffset()
}

// Replica is a follower's copy of a durable shard: the same log, in the
// same directory, as the shard would have on its leader, written only
// with the records the leader ships, at the leader's offsets. It serves
// no client. A broker holds a shard either as its leader (Shard) or as a
// replica, never both.
type Replica struct {
	st    *Stream
	index uint32
	dir   string
	log   *flog.Log
	// mu serializes appends, fences and truncations, so that the checks
	// of the fence and the next offset and the append are one step.
	mu sync.Mutex
	// fenced is the generation the replica promised to (replica_fence.go).
	// Guarded by mu.
	fenced uint64
	// lastAt and lastGen, when lastAt > 0, say that the copy's record at
	// lastAt-1 is of generation lastGen: the last one appended, whose
	// generation the next shipment's check would otherwise read back.
	// Guarded by mu.
	lastAt, lastGen uint64
	// damaged, when set, says the copy lost records it promised and what
	// it must hold again to count (replica_damage.go). Guarded by mu.
	damaged *damage
	// damageCounted says the copy counts in felix_shard_replicas_damaged:
	// set when it opens damaged, cleared once (by its refill or its
	// close), so it leaves the gauge exactly once.
	damageCounted atomic.Bool
	// grown is closed and replaced whenever the copy's end moves (an
	// append or a cut), so that a shipment waiting for the ones before it
	// (Shipment.AwaitPrior) looks again. Guarded by mu; nil until a
	// shipment first waits.
	grown chan struct{}
	// committed is the leader's committed mark as last shipped; the
	// replica's retention keeps everything from it (0, everything, until
	// the leader has said).
	committed atomic.Uint64
}

// Index returns the shard number.
func (r *Replica) Index() uint32 { return r.index }

// NextOffset is the offset the replica expects the leader's next record at.
func (r *Replica) NextOffset() uint64 { return r.log.NextOffset() }

// DurableOffset is one past the last record the replica holds under its
// fsync policy.
func (r *Replica) DurableOffset() uint64 { return r.log.DurableOffset() }

// StartOffset is the oldest offset the replica retains.
func (r *Replica) StartOffset() uint64 { return r.log.StartOffset() }

// Committed is the leader's committed mark as last shipped.
func (r *Replica) Committed() uint64 { return r.committed.Load() }

// SetCommitted records the leader's committed mark: retention then keeps
// every record from it (flog.NoRetentionFloor: nothing held).
func (r *Replica) SetCommitted(off uint64) {
	r.committed.Store(off)
	r.log.SetRetentionFloor(off)
}

// Append writes records shipped by the leader of generation, which carry
// their offsets, and waits until they are durable under the replica's
// fsync policy. A leader older than the replica's fence is refused
// (stale_generation). The records must start at or below NextOffset:
// those the replica holds already are skipped (a re-send after a lost
// answer), so that shipping can repeat itself safely. Records starting
// past NextOffset are refused with an *OffsetGapError naming the offset
// wanted; nothing is written. It returns the replica's next and durable
// offsets afterwards.
func (r *Replica) Append(ctx context.Context, generation uint64, recs []flog.Record) (next, durable uint64, err error) {
	return r.Ship(ctx, Shipment{Generation: generation, Records: recs, NoPrevCheck: true})
}

// Shipment is one batch a leader ships to a replica (Replica.Ship).
type Shipment struct {
	// Generation is the leader's.
	Generation uint64
	// From is the offset of Records[0] (or, with none, where the leader
	// believes the copy ends); PrevGeneration the generation of the
	// leader's record at From-1, 0 at the start of its log.
	From, PrevGeneration uint64
	// NoPrevCheck skips the check of PrevGeneration.
	NoPrevCheck bool
	// TruncateTo, when set, cuts the copy back to it first: the leader
	// found that the copy's suffix from there is an older leader's.
	TruncateTo *uint64
	Records    []flog.Record
	// AwaitPrior, when positive, is how long records that start past the
	// copy's end wait for the shipments before them, which the leader
	// sent first but which may arrive later (a pipelined leader keeps
	// several in flight, on call streams that do not keep their order),
	// before they are refused with an *OffsetGapError. Zero refuses at
	// once.
	AwaitPrior time.Duration
	// Tail is where the leader's log ended when it shipped (0: not said);
	// a damaged copy that holds it is whole again.
	Tail uint64
}

// DivergedError refuses a shipment whose PrevGeneration the replica's
// copy does not agree with: its record at From-1 is of Generation, and
// the copy ends at Next.
type DivergedError struct{ Generation, Next uint64 }

func (e *DivergedError) Error() string {
	return fmt.Sprintf("the replica's copy diverged: its record before the shipment is of generation %d (copy ends at %d)", e.Generation, e.Next)
}

// Ship is Append with the checks a leader's shipping needs: the copy is
// first cut back to TruncateTo (refused unless every record cut is of a
// generation older than the leader's), then, unless NoPrevCheck, its
// record at From-1 must be of PrevGeneration (else a *DivergedError).
func (r *Replica) Ship(ctx context.Context, s Shipment) (next, durable uint64, err error) {
	var deadline *time.Timer
	for {
		next, durable, wait, err := r.shipOnce(ctx, s)
		if wait == nil {
			if deadline != nil {
				deadline.Stop()
			}
			if err == nil {
				r.refilled(s.Tail)
			}
			return next, durable, err
		}
		if deadline == nil {
			deadline = time.NewTimer(s.AwaitPrior)
		}
		select {
		case <-wait:
		case <-deadline.C:
			// Give up waiting: the next attempt refuses the gap.
			s.AwaitPrior = 0
		case <-ctx.Done():
			return next, durable, fmt.Errorf("replica of shard %d of %s: waiting for offset %d: %w", r.index, r.st.key.Stream, s.Records[0].Offset, ctx.Err())
		}
	}
}

// shipOnce is one attempt of Ship. When the records start past the
// copy's end and s.AwaitPrior allows a wait, it writes nothing and
// returns a channel closed once the copy's end moves.
func (r *Replica) shipOnce(ctx context.Context, s Shipment) (next, durable uint64, wait <-chan struct{}, err error) {
	recs, generation := s.Records, s.Generation
	r.mu.Lock()
	if generation < r.fenced {
		r.mu.Unlock()
		return r.log.NextOffset(), r.log.DurableOffset(), nil, errStaleGeneration(r, generation)
	}
	if t := s.TruncateTo; t != nil && *t < r.log.NextOffset() {
		last, err := r.generationAt(r.log.NextOffset())
		if err == nil && last >= generation {
			err = fmt.Errorf("refusing to cut back to %d records of generation %d, not older than the leader's %d", *t, last, generation)
		}
		if err == nil {
			err = r.cutPromise(*t)
		}
		if err == nil {
			err = r.log.TruncateTo(*t)
			r.lastAt = 0
			r.signalGrownLocked()
		}
		if err != nil {
			r.mu.Unlock()
			return r.log.NextOffset(), r.log.DurableOffset(), nil, fmt.Errorf("replica of shard %d of %s: %w", r.index, r.st.key.Stream, err)
		}
	}
	if !s.NoPrevCheck && s.From > 0 && s.From <= r.log.NextOffset() && s.From > r.log.StartOffset() {
		g, err := r.lastGen, error(nil)
		if r.lastAt != s.From {
			g, err = r.generationAt(s.From)
		}
		if err != nil {
			r.mu.Unlock()
			return r.log.NextOffset(), r.log.DurableOffset(), nil, err
		}
		if g != s.PrevGeneration {
			r.mu.Unlock()
			return r.log.NextOffset(), r.log.DurableOffset(), nil, &DivergedError{Generation: g, Next: r.log.NextOffset()}
		}
	}
	next = r.log.NextOffset()
	if len(recs) > 0 && recs[0].Offset > next {
		if s.AwaitPrior > 0 {
			if r.grown == nil {
				r.grown = make(chan struct{})
			}
			wait = r.grown
			r.mu.Unlock()
			return next, 0, wait, nil
		}
		r.mu.Unlock()
		return next, r.log.DurableOffset(), nil, &OffsetGapError{Want: next, Got: recs[0].Offset}
	}
	for len(recs) > 0 && recs[0].Offset < next {
		recs = recs[1:]
	}
	if len(recs) == 0 {
		r.mu.Unlock()
		return next, r.log.DurableOffset(), nil, nil
	}
	app, err := r.log.AppendRecords(recs)
	if err != nil {
		r.mu.Unlock()
		if errors.Is(err, flog.ErrNoSpace) {
			return next, r.log.DurableOffset(), nil, errStorageFull("replicated batch", err)
		}
		return next, r.log.DurableOffset(), nil, fmt.Errorf("replica of shard %d of %s: %w", r.index, r.st.key.Stream, err)
	}
	last := &recs[len(recs)-1]
	r.lastAt, r.lastGen = last.Offset+1, last.Generation
	r.signalGrownLocked()
	r.mu.Unlock()
	if err := r.log.Wait(ctx, app); err != nil {
		return r.log.NextOffset(), r.log.DurableOffset(), nil, fmt.Errorf("replica of shard %d of %s: %w", r.index, r.st.key.Stream, err)
	}
	return r.log.NextOffset(), r.log.DurableOffset(), nil, nil
}

// signalGrownLocked wakes the shipments waiting for the copy's end to
// move. Caller holds mu.
func (r *Replica) signalGrownLocked() {
	if r.grown != nil {
		close(r.grown)
		r.grown = nil
	}
}

// OffsetGapError refuses shipped records that start past the replica's
// next offset: the leader must send from Want.
type OffsetGapError struct{ Want, Got uint64 }

func (e *OffsetGapError) Error() string {
	return fmt.Sprintf("replica expects offset %d, got records from %d", e.Want, e.Got)
}

// close closes the replica's log; its files stay.
func (r *Replica) close() {
	// Still damaged or not, no longer a copy open here: a damage marker
	// stays and counts again at its next open.
	r.uncountDamage()
	r.st.cfg.metrics.durable.removeLog(r.log)
	if err := r.log.Close(); err != nil {
		r.st.cfg.Storage.logger().Warn("closing a shard replica's log", "stream", r.st.key.Stream, "shard", r.index, "err", err)
	}
}

// openReplica opens slot i's replica, or returns the one open. A shard
// open here as leader refuses: the broker must close it first.
func (st *Stream) openReplica(i uint32) (*Replica, error) {
	if int(i) >= len(st.shards) {
		return nil, wire.CheckShard("stream", st.key.Stream, i, uint32(len(st.shards)))
	}
	if !st.durable() {
		return nil, wire.NewError(wire.CodeInvalidRequest, "stream %s is not durable here: it has no log to replicate", st.key.Stream).
			WithDetail(wire.DetailReason, "not_durable")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, errStreamGone(st.key)
	}
	if r := st.replicas[i].Load(); r != nil {
		return r, nil
	}
	if st.shards[i].Load() != nil {
		return nil, wire.NewError(wire.CodeShardUnavailable, "shard %d of stream %s is led by this broker, not replicated to it", i, st.key.Stream).
			WithDetail(wire.DetailReason, "leading").WithDetail("shard", i)
	}
	if !st.claimed {
		st.claimErr = st.cfg.Storage.claimStreamDir(st.key, st.identity)
		st.claimed = true
	}
	if st.claimErr != nil {
		return nil, wire.NewError(wire.CodeShardUnavailable, "shard %d of stream %s: %v", i, st.key.Stream, st.claimErr).
			WithDetail(wire.DetailReason, "log_unavailable")
	}
	c := st.cfg.Storage
	dir := ShardDir(c.Dir, st.key, i)
	fenced, err := readFence(dir)
	if err != nil {
		return nil, wire.NewError(wire.CodeShardUnavailable, "replica of shard %d of stream %s: %v", i, st.key.Stream, err).
			WithDetail(wire.DetailReason, "log_unavailable").WithDetail("shard", i)
	}
	lg, dmg, err := st.openReplicaLog(i, dir, fenced)
	if err != nil {
		return nil, withLogReason(wire.NewError(wire.CodeShardUnavailable, "replica of shard %d of stream %s: %v", i, st.key.Stream, err).
			WithDetail("shard", i), err)
	}
	// Hold everything until the leader names its committed mark.
	lg.SetRetentionFloor(0)
	r := &Replica{st: st, index: i, dir: dir, log: lg, fenced: fenced, damaged: dmg}
	if dmg != nil {
		r.damageCounted.Store(true)
		st.cfg.metrics.replicasDamaged.Add(1)
	}
	st.cfg.metrics.durable.addLog(lg)
	st.replicas[i].Store(r)
	return r, nil
}

// closeReplica closes slot i's replica, if one is open.
func (st *Stream) closeReplica(i uint32) bool {
	if int(i) >= len(st.replicas) {
		return false
	}
	st.mu.Lock()
	r := st.replicas[i].Swap(nil)
	st.mu.Unlock()
	if r == nil {
		return false
	}
	r.close()
	return true
}

// openReplicas returns the replicas open now, in shard order.
func (st *Stream) openReplicas() []*Replica {
	var out []*Replica
	for i := range st.replicas {
		if r := st.replicas[i].Load(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// OpenStreamReplica opens (or returns the open) replica of shard of the
// stream k: a follower's copy of the shard's log, written by the leader's
// shipping. A stream the broker does not hold refuses with not_found.
func (b *Broker) OpenStreamReplica(k StreamKey, shard uint32) (*Replica, error) {
	st, ok := b.Stream(k)
	if !ok {
		return nil, wire.NewError(wire.CodeNotFound, "stream %s/%s/%s is not known to this broker", k.Tenant, k.Namespace, k.Stream)
	}
	return st.openReplica(shard)
}

// StreamReplica returns the open replica of shard of the stream k, if any.
func (b *Broker) StreamReplica(k StreamKey, shard uint32) (*Replica, bool) {
	st, ok := b.Stream(k)
	if !ok || int(shard) >= len(st.replicas) {
		return nil, false
	}
	r := st.replicas[shard].Load()
	return r, r != nil
}

// CloseStreamReplica closes the replica of shard of the stream k; its
// files stay. It reports whether one was open.
func (b *Broker) CloseStreamReplica(k StreamKey, shard uint32) bool {
	st, ok := b.Stream(k)
	if !ok {
		return false
	}
	return st.closeReplica(shard)
}

// Replication returns what the shard consults about its followers (nil
// when nobody copies its log).
func (sh *Shard) Replication() Replication { return sh.repl }

// WaitDurable waits until the leader's log holds the claim under its
// fsync policy (what Finish waits for first), or ctx ends.
func (c *Claimed) WaitDurable(ctx context.Context) error {
	if c.dup {
		return nil
	}
	return c.sh.log.Wait(ctx, c.app)
}

package core

import (
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/wire"
)

// StreamKey names a stream.
type StreamKey struct{ Tenant, Namespace, Stream string }

// Stream is a registered stream: a fixed set of shard slots and an
// overflow policy that may change while it lives. A change of shard count
// replaces the Stream (see Broker.ApplyStream).
//
// A slot holds an open *Shard or nil. Without Config.PlacedShards every
// slot is opened when the stream is made and stays open until it closes;
// with it, slots open and close as this broker gains and loses the shards
// (Broker.OpenStreamShard, CloseStreamShard). A shard is complete (its log
// open) before it is stored in its slot.
type Stream struct {
	key    StreamKey
	cfg    Config
	policy atomic.Uint32 // QueuePolicy
	spec   atomic.Pointer[wire.StreamSpec]
	// identity is what the stream's files are written for; it never
	// changes (another identity is another Stream).
	identity StreamIdentity
	// shards never changes length after construction. Invariant:
	// len(shards) >= 1. Slots are written only under mu.
	shards []atomic.Pointer[Shard]
	// replicas holds, per slot, this broker's follower copy of a shard
	// another broker leads (replica.go); a slot is never open in both.
	// Same length as shards; written only under mu.
	replicas []atomic.Pointer[Replica]

	// mu serializes opening and closing shards, so a slot is opened once
	// and never after the stream closed. It is held while a shard's log
	// opens (recovery reads disk), which delays only this stream's other
	// opens and closes.
	mu sync.Mutex
	// closed is set, under mu, when the stream is removed or replaced.
	closed bool
	// claimed and claimErr are the result of readying the stream's
	// directory, done once, on the first durable shard opened. Guarded
	// by mu.
	claimed  bool
	claimErr error
}

func newStream(cfg Config, spec wire.StreamSpec, policy QueuePolicy, id StreamIdentity) *Stream {
	st := &Stream{
		key:      StreamKey{Tenant: spec.TenantID, Namespace: spec.Namespace, Stream: spec.Stream},
		cfg:      cfg,
		identity: id,
	}
	st.update(spec, policy)
	st.shards = make([]atomic.Pointer[Shard], max(spec.Shards, 1))
	st.replicas = make([]atomic.Pointer[Replica], len(st.shards))
	if !cfg.PlacedShards {
		st.mu.Lock()
		for i := range st.shards {
			st.openLocked(uint32(i), 0)
		}
		st.mu.Unlock()
	}
	return st
}

// openLocked opens slot i (st.mu is held): a durable shard continues its
// log's offsets, an in-memory one starts empty.
func (st *Stream) openLocked(i uint32, generation uint64) *Shard {
	return st.openLockedAs(i, generation, false)
}

// openLockedAs is openLocked; newLeader as for openAs.
func (st *Stream) openLockedAs(i uint32, generation uint64, newLeader bool) *Shard {
	sh := newShard(st, i)
	sh.generation.Store(generation)
	if st.durable() {
		if !st.claimed {
			st.claimErr = st.cfg.Storage.claimStreamDir(st.key, st.identity)
			st.claimed = true
		}
		sh.openShardLog(st.cfg.Storage, st.Spec(), st.claimErr)
		if sh.log != nil {
			// Every record this leadership writes carries its generation.
			sh.log.SetGeneration(generation)
			if f := st.cfg.ReplicationFor; f != nil {
				sh.repl = f(st.key, i)
			}
			if newLeader && sh.log.NextOffset() > 0 {
				sh.startGeneration(generation)
			}
		}
	}
	st.shards[i].Store(sh)
	return sh
}

// open opens shard i for an ownership of generation, unless it is open:
// then only its generation changes. A closed stream refuses.
func (st *Stream) open(i uint32, generation uint64) error {
	return st.openAs(i, generation, false)
}

// openAs is open; with newLeader, a durable shard whose log holds records
// of an earlier leadership first appends a generation-start record at
// generation, and serves no read (subscribe, replay, stream_read,
// offset_for_time) until its replication's committed mark has passed it:
// a majority then holds a record of the new generation, so nothing older
// that it serves can be lost to a later failover.
func (st *Stream) openAs(i uint32, generation uint64, newLeader bool) error {
	if int(i) >= len(st.shards) {
		return wire.CheckShard("stream", st.key.Stream, i, uint32(len(st.shards)))
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return errStreamGone(st.key)
	}
	if sh := st.shards[i].Load(); sh != nil {
		sh.generation.Store(generation)
		if sh.log != nil {
			sh.log.SetGeneration(generation)
		}
		return nil
	}
	if r := st.replicas[i].Swap(nil); r != nil {
		// Promoted: the replica's log becomes the shard's.
		r.close()
	}
	st.openLockedAs(i, generation, newLeader)
	return nil
}

// closeShard empties slot i and ends its subscribers with cause; a
// durable shard's log closes (its files stay). It reports whether the
// slot was open.
func (st *Stream) closeShard(i uint32, cause error) bool {
	if int(i) >= len(st.shards) {
		return false
	}
	st.mu.Lock()
	sh := st.shards[i].Swap(nil)
	st.mu.Unlock()
	if sh == nil {
		return false
	}
	sh.close(cause, false)
	sh.closeLog()
	return true
}

// openShards returns the shards open now, in shard order.
func (st *Stream) openShards() []*Shard {
	out := make([]*Shard, 0, len(st.shards))
	for i := range st.shards {
		if sh := st.shards[i].Load(); sh != nil {
			out = append(out, sh)
		}
	}
	return out
}

// durable reports whether the stream keeps logs: its spec asks for it and
// the broker has storage.
func (st *Stream) durable() bool {
	return st.Spec().Durable && st.cfg.Storage != nil && st.cfg.Storage.Dir != ""
}

// Durable reports whether the stream's shards write segment logs.
func (st *Stream) Durable() bool { return st.durable() }

func (st *Stream) update(spec wire.StreamSpec, policy QueuePolicy) {
	st.policy.Store(uint32(policy))
	st.spec.Store(&spec)
	if !st.durable() {
		return
	}
	r := st.cfg.Storage.retentionFor(spec)
	for _, sh := range st.openShards() {
		if sh.log != nil {
			sh.log.SetRetention(r)
		}
	}
	for _, rp := range st.openReplicas() {
		rp.log.SetRetention(r)
	}
}

// applyRetention deletes what the stream's retention no longer keeps, on
// the shards open here.
func (st *Stream) applyRetention() {
	for _, sh := range st.openShards() {
		if sh.log == nil {
			continue
		}
		if sh.repl != nil {
			// A replicated shard keeps what a majority may still lack.
			sh.log.SetRetentionFloor(sh.repl.Committed())
		}
		if _, err := sh.log.ApplyRetention(); err != nil {
			st.cfg.Storage.logger().Warn("applying retention", "stream", st.key.Stream, "shard", sh.index, "err", err)
		}
	}
	for _, rp := range st.openReplicas() {
		if _, err := rp.log.ApplyRetention(); err != nil {
			st.cfg.Storage.logger().Warn("applying retention to a replica", "stream", st.key.Stream, "shard", rp.index, "err", err)
		}
	}
}

// closeLogs closes every open shard log. The files stay.
func (st *Stream) closeLogs() {
	if !st.durable() {
		return
	}
	for _, sh := range st.openShards() {
		sh.closeLog()
	}
	for i := range st.replicas {
		st.closeReplica(uint32(i))
	}
}

// Key returns the stream's name.
func (st *Stream) Key() StreamKey { return st.key }

// Shards returns the shard count.
func (st *Stream) Shards() uint32 { return uint32(len(st.shards)) }

// Policy returns the stream's current subscriber-queue overflow policy.
func (st *Stream) Policy() QueuePolicy { return QueuePolicy(st.policy.Load()) }

// Spec returns the catalog spec the stream was last applied with.
func (st *Stream) Spec() wire.StreamSpec { return *st.spec.Load() }

// ShardForKey returns the shard a keyed publish goes to:
// wire.ShardForKey over the stream's shard count (the jump consistent hash
// of FNV-1a-64(key)), the mapping clients compute too. An empty key goes
// to shard 0.
func (st *Stream) ShardForKey(key []byte) uint32 {
	return wire.ShardForKey(key, uint32(len(st.shards)))
}

// Shard returns shard i; an invalid_request *wire.Error (reason
// shard_out_of_range) when the stream has no such shard, and a
// shard_unavailable one (reason not_ready) when shard i is not open on
// this broker.
func (st *Stream) Shard(i uint32) (*Shard, error) {
	if int(i) >= len(st.shards) {
		return nil, wire.NewError(wire.CodeInvalidRequest, "shard %d out of range: stream %s has %d shards", i, st.key.Stream, len(st.shards)).
			WithDetail("reason", "shard_out_of_range").WithDetail("shards", len(st.shards))
	}
	if sh := st.shards[i].Load(); sh != nil {
		return sh, nil
	}
	return nil, wire.NewError(wire.CodeShardUnavailable, "shard %d of stream %s is not open on this broker", i, st.key.Stream).
		WithDetail(wire.DetailReason, ReasonNotReady).WithDetail("shard", i)
}

// ReasonNotReady is the detail reason of a shard that is not open on this
// broker (it is not placed here, or not opened yet).
const ReasonNotReady = "not_ready"

// close marks the stream closed and ends every open shard's subscribers.
func (st *Stream) close(err error, discard bool) {
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
	for _, sh := range st.openShards() {
		sh.close(err, discard)
	}
}

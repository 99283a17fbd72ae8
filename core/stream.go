package core

import (
	"sync/atomic"

	"github.com/felixmq/felix/wire"
)

// StreamKey names a stream.
type StreamKey struct{ Tenant, Namespace, Stream string }

// Stream is a registered stream: a fixed set of shards and an overflow
// policy that may change while it lives. A change of shard count replaces
// the Stream (see Broker.ApplyStream).
type Stream struct {
	key    StreamKey
	cfg    Config
	policy atomic.Uint32 // QueuePolicy
	spec   atomic.Pointer[wire.StreamSpec]
	// identity is what the stream's files are written for; it never
	// changes (another identity is another Stream).
	identity StreamIdentity
	// shards never changes after construction. Invariant: len(shards) >= 1.
	shards []*Shard
}

func newStream(cfg Config, spec wire.StreamSpec, policy QueuePolicy, id StreamIdentity) *Stream {
	st := &Stream{
		key:      StreamKey{Tenant: spec.TenantID, Namespace: spec.Namespace, Stream: spec.Stream},
		cfg:      cfg,
		identity: id,
	}
	st.update(spec, policy)
	n := max(spec.Shards, 1)
	st.shards = make([]*Shard, n)
	var claimErr error
	if st.durable() {
		claimErr = cfg.Storage.claimStreamDir(st.key, id)
	}
	for i := range st.shards {
		st.shards[i] = newShard(st, uint32(i))
		if st.durable() {
			st.shards[i].openShardLog(cfg.Storage, spec, claimErr)
		}
	}
	return st
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
	for _, sh := range st.shards {
		if sh.log != nil {
			sh.log.SetRetention(r)
		}
	}
}

// applyRetention deletes what the stream's retention no longer keeps.
func (st *Stream) applyRetention() {
	for _, sh := range st.shards {
		if sh.log == nil {
			continue
		}
		if _, err := sh.log.ApplyRetention(); err != nil {
			st.cfg.Storage.logger().Warn("applying retention", "stream", st.key.Stream, "shard", sh.index, "err", err)
		}
	}
}

// closeLogs closes every shard log. The files stay.
func (st *Stream) closeLogs() {
	if !st.durable() {
		return
	}
	for _, sh := range st.shards {
		sh.closeLog()
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

// Shard returns shard i, or an invalid_request *wire.Error when the
// stream has no such shard.
func (st *Stream) Shard(i uint32) (*Shard, error) {
	if int(i) >= len(st.shards) {
		return nil, wire.NewError(wire.CodeInvalidRequest, "shard %d out of range: stream %s has %d shards", i, st.key.Stream, len(st.shards)).
			WithDetail("reason", "shard_out_of_range").WithDetail("shards", len(st.shards))
	}
	return st.shards[i], nil
}

// close ends every shard's subscribers.
func (st *Stream) close(err error, discard bool) {
	for _, sh := range st.shards {
		sh.close(err, discard)
	}
}

package core

import (
	"errors"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Reasons a Subscriber ends. Next returns one of them (or the caller's
// context error) once the subscriber is over.
var (
	// ErrStreamDeleted ends the subscribers of a stream that was removed,
	// or replaced because its shard count changed.
	ErrStreamDeleted = errors.New("core: stream deleted")
	// ErrSubscriberClosed ends a subscriber closed by its owner or by
	// Broker.Close.
	ErrSubscriberClosed = errors.New("core: subscriber closed")
)

func errStreamGone(k StreamKey) *wire.Error {
	return wire.NewError(wire.CodeNotFound, "stream %s/%s/%s was deleted", k.Tenant, k.Namespace, k.Stream).
		WithDetail("reason", "stream_deleted")
}

func errEmptyBatch() *wire.Error {
	return wire.NewError(wire.CodeInvalidRequest, "publish batch has no payloads")
}

// ShardMovedError ends the subscribers and watches of a shard this broker
// no longer owns, and refuses what still reaches the closed shard. Moved
// names the new owner when it is known (its SubscriptionID is left for
// the broker to fill in); ResumeFrom, on a durable shard, is the next
// offset the old owner would have given.
type ShardMovedError struct{ Moved wire.ShardMoved }

func (e *ShardMovedError) Error() string {
	if e.Moved.NodeID != "" {
		return fmt.Sprintf("shard %d moved to %s at %s (generation %d)", e.Moved.Shard, e.Moved.NodeID, e.Moved.Addr, e.Moved.Generation)
	}
	return fmt.Sprintf("shard %d moved away from this broker", e.Moved.Shard)
}

// WireError is the refusal for a client that cannot take shard_moved:
// not_leader naming the new owner, or shard_unavailable (reason
// not_ready) when none is known yet.
func (e *ShardMovedError) WireError() *wire.Error {
	if e.Moved.NodeID != "" && e.Moved.Addr != "" {
		nl := wire.NotLeader{NodeID: e.Moved.NodeID, Addr: e.Moved.Addr, Generation: e.Moved.Generation}
		return nl.Err().WithDetail("shard", e.Moved.Shard)
	}
	return wire.NewError(wire.CodeShardUnavailable, "%s; its new owner is not known yet", e.Error()).
		WithDetail(wire.DetailReason, ReasonNotReady).WithDetail("shard", e.Moved.Shard).WithDetail("generation", e.Moved.Generation)
}

// errClosed refuses a request that reached a closed shard: shard moved
// when it closed because it moved, the stream deleted otherwise.
func (sh *Shard) errClosed() *wire.Error {
	if p := sh.closeCause.Load(); p != nil {
		var moved *ShardMovedError
		if errors.As(*p, &moved) {
			return moved.WireError()
		}
	}
	return errStreamGone(sh.stream.key)
}

package core

import (
	"errors"

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

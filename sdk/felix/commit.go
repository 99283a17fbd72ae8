package felix

import (
	"context"
	"errors"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Atomic commits (FEATURE_ATOMIC_COMMIT; docs/atomic-commit.md).
//
// Commit writes exactly one event (CommitPublish or CommitEnqueue) and the
// state changes beside it (CommitPut, CommitDelete) as one record on the
// durable stream shard the entity key routes to; StateGet reads that
// state back with the commit's offset as its version. Every op names its
// stream, and they must all name the event's: another stream is another
// log, and a commit is never split across logs, so such a commit is
// refused before anything is sent (*CommitError, NotOnOwningShard).
//
// A commit is not idempotent: one whose answer was lost (the connection
// failed after it was sent) may have been written, fails with a
// *BrokerError of retry class outcome_unknown, and is never sent again by
// this package. StateGet tells whether it landed: the version names the
// commit that wrote the value.

// CommitOp is one operation of a commit; make it with CommitPublish,
// CommitEnqueue, CommitPut or CommitDelete.
type CommitOp struct {
	op     string
	stream string
	key    string
	data   []byte // the event's payload, or a put's value
}

// CommitPublish is the commit's event, published to stream.
func CommitPublish(stream string, payload []byte) CommitOp {
	return CommitOp{op: wire.CommitOpPublish, stream: stream, data: payload}
}

// CommitEnqueue is the commit's event, for the stream's consumer groups;
// on the log it is the same record as CommitPublish's.
func CommitEnqueue(stream string, payload []byte) CommitOp {
	return CommitOp{op: wire.CommitOpEnqueue, stream: stream, data: payload}
}

// CommitPut sets key to value in the state of the stream's shard.
func CommitPut(stream, key string, value []byte) CommitOp {
	return CommitOp{op: wire.CommitOpPut, stream: stream, key: key, data: value}
}

// CommitDelete removes key from the state of the stream's shard.
func CommitDelete(stream, key string) CommitOp {
	return CommitOp{op: wire.CommitOpDelete, stream: stream, key: key}
}

// Stream returns the stream the op names.
func (o CommitOp) Stream() string { return o.stream }

// CommitErrorKind says why a commit was refused before it was sent.
type CommitErrorKind uint8

const (
	// CommitEventCount: the commit did not carry exactly one event
	// (CommitPublish or CommitEnqueue); Events says how many it carried.
	CommitEventCount CommitErrorKind = iota + 1
	// CommitNotOnOwningShard: op Index names Stream, not the event's
	// stream, whose shard owns the commit.
	CommitNotOnOwningShard
	// CommitUnsupported: the broker did not advertise
	// FEATURE_ATOMIC_COMMIT. It unwraps to a *BrokerError of code
	// unsupported.
	CommitUnsupported
)

// CommitError is a commit refused by this client before anything was
// sent.
type CommitError struct {
	Kind CommitErrorKind
	// Index is the op on another stream (CommitNotOnOwningShard).
	Index int
	// Stream is that op's stream; Owning the event's.
	Stream, Owning string
	// Events is how many events the commit carried (CommitEventCount).
	Events int
	err    error
}

// Error implements error.
func (e *CommitError) Error() string {
	switch e.Kind {
	case CommitEventCount:
		return fmt.Sprintf("felix: a commit writes exactly one event (publish or enqueue), this one has %d; nothing was sent", e.Events)
	case CommitNotOnOwningShard:
		return fmt.Sprintf("felix: commit op %d is on stream %q, not the event's stream %q: a commit writes one shard's log; nothing was sent", e.Index, e.Stream, e.Owning)
	}
	return "felix: the broker does not serve atomic commits (FEATURE_ATOMIC_COMMIT); nothing was sent"
}

// Unwrap returns the unsupported *BrokerError of a CommitUnsupported.
func (e *CommitError) Unwrap() error { return e.err }

// commitMessage checks ops and builds the commit for the event's stream.
func (c *Client) commitMessage(namespace string, ops []CommitOp) (*wire.Commit, error) {
	if err := c.needFeature(wire.FeatureAtomicCommit, "atomic commits (FEATURE_ATOMIC_COMMIT)"); err != nil {
		return nil, notSent(&CommitError{Kind: CommitUnsupported, err: err})
	}
	events, owning := 0, ""
	for _, op := range ops {
		if op.op == wire.CommitOpPublish || op.op == wire.CommitOpEnqueue {
			events++
			owning = op.stream
		}
	}
	if events != 1 {
		return nil, notSent(&CommitError{Kind: CommitEventCount, Events: events})
	}
	m := &wire.Commit{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: owning, Ops: make([]wire.CommitOp, len(ops))}
	for i, op := range ops {
		if op.op == "" {
			return nil, invalidArg("commit op %d was not made by CommitPublish, CommitEnqueue, CommitPut or CommitDelete", i)
		}
		if op.stream != owning {
			return nil, notSent(&CommitError{Kind: CommitNotOnOwningShard, Index: i, Stream: op.stream, Owning: owning})
		}
		w := wire.CommitOp{Op: op.op}
		switch op.op {
		case wire.CommitOpPublish, wire.CommitOpEnqueue:
			w.Payload = nonNil(op.data)
		case wire.CommitOpPut:
			w.Key, w.Value = op.key, nonNil(op.data)
		case wire.CommitOpDelete:
			w.Key = op.key
		}
		if w.Key == "" && (op.op == wire.CommitOpPut || op.op == wire.CommitOpDelete) {
			return nil, invalidArg("commit op %d (%s) has an empty key", i, op.op)
		}
		m.Ops[i] = w
	}
	return m, nil
}

// Commit writes ops (exactly one event and any number of puts and
// deletes, all on the event's stream) as one record on the shard
// entityKey routes to (shard 0 for a nil key), and returns the record's
// offset once it is durable. It needs a durable stream, and is served
// only by the shard's owner: elsewhere it fails with a *NotLeaderError
// (ClusterClient.Commit follows it).
func (c *Client) Commit(ctx context.Context, namespace string, entityKey []byte, ops []CommitOp) (uint64, error) {
	return c.commit(ctx, namespace, entityKey, nil, ops, nil)
}

// CommitIf is Commit written only if its record would take offset
// expected, the shard's next; otherwise it fails with an
// *OffsetMismatchError and nothing was written.
func (c *Client) CommitIf(ctx context.Context, namespace string, entityKey []byte, ops []CommitOp, expected uint64) (uint64, error) {
	return c.commit(ctx, namespace, entityKey, nil, ops, &expected)
}

// CommitOnShard is Commit on the shard given rather than the one an
// entity key hashes to. It also needs FEATURE_EXPLICIT_SHARD.
func (c *Client) CommitOnShard(ctx context.Context, namespace string, shard uint32, ops []CommitOp) (uint64, error) {
	return c.commit(ctx, namespace, nil, &shard, ops, nil)
}

// CommitIfOnShard is CommitIf on the shard given.
func (c *Client) CommitIfOnShard(ctx context.Context, namespace string, shard uint32, ops []CommitOp, expected uint64) (uint64, error) {
	return c.commit(ctx, namespace, nil, &shard, ops, &expected)
}

func (c *Client) commit(ctx context.Context, namespace string, entityKey []byte, shard *uint32, ops []CommitOp, expected *uint64) (uint64, error) {
	m, err := c.commitMessage(namespace, ops)
	if err != nil {
		return 0, err
	}
	if shard != nil {
		if err := c.needFeature(wire.FeatureExplicitShard, "explicit shards (FEATURE_EXPLICIT_SHARD)"); err != nil {
			return 0, err
		}
	}
	m.EntityKey, m.Shard, m.ExpectedOffset = entityKey, shard, expected
	size := 256 + len(m.Namespace) + len(m.Stream) + len(m.TenantID) + 2*len(entityKey)
	for _, op := range m.Ops {
		size += 64 + len(op.Key) + (len(op.Payload)+len(op.Value)+4)/3*4
	}
	if uint64(size) > uint64(c.cfg.MaxFrameBytes) {
		return 0, invalidArg("commit of about %d encoded bytes is larger than MaxFrameBytes %d", size, c.cfg.MaxFrameBytes)
	}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		if !wasNotSent(err) && errors.Is(err, ErrConnectionLost) {
			return 0, writeOutcomeUnknown("commit", err)
		}
		return 0, err
	}
	switch a := res.msg.(type) {
	case *wire.PublishOK:
		if a.Offset == nil {
			return 0, fmt.Errorf("felix: the broker wrote a commit without saying where")
		}
		if expected != nil && *a.Offset != *expected {
			return 0, fmt.Errorf("felix: the broker wrote a commit expected at %d at offset %d", *expected, *a.Offset)
		}
		publishTotal.Add(1)
		return *a.Offset, nil
	case *wire.PublishRefused:
		if a.OffsetMismatch == nil || expected == nil {
			return 0, fromWire(a.Err())
		}
		return 0, &OffsetMismatchError{Expected: *expected, Tail: a.OffsetMismatch.Tail}
	}
	return 0, fmt.Errorf("felix: commit answered with %T", res.msg)
}

// StateGet reads key of the state of the stream shard entityKey routes
// to, returning its value and version (the offset of the commit that
// wrote it); found is false for a key never written or deleted. A commit
// is seen once its record is readable. State committed to a shard named
// with CommitOnShard is read with StateGetOnShard.
func (c *Client) StateGet(ctx context.Context, namespace, stream string, entityKey []byte, key string) (value []byte, version uint64, found bool, err error) {
	return c.stateGet(ctx, &wire.StateGet{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, EntityKey: entityKey, Key: key})
}

// StateGetOnShard is StateGet on the shard given. It also needs
// FEATURE_EXPLICIT_SHARD.
func (c *Client) StateGetOnShard(ctx context.Context, namespace, stream string, shard uint32, key string) (value []byte, version uint64, found bool, err error) {
	if err := c.needFeature(wire.FeatureExplicitShard, "explicit shards (FEATURE_EXPLICIT_SHARD)"); err != nil {
		return nil, 0, false, err
	}
	return c.stateGet(ctx, &wire.StateGet{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, Shard: &shard, Key: key})
}

func (c *Client) stateGet(ctx context.Context, m *wire.StateGet) ([]byte, uint64, bool, error) {
	if err := c.needFeature(wire.FeatureAtomicCommit, "state_get (FEATURE_ATOMIC_COMMIT)"); err != nil {
		return nil, 0, false, notSent(&CommitError{Kind: CommitUnsupported, err: err})
	}
	if m.Key == "" {
		return nil, 0, false, invalidArg("state_get of an empty key")
	}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return nil, 0, false, err
	}
	v, ok := res.msg.(*wire.StateValue)
	switch {
	case !ok:
		return nil, 0, false, fmt.Errorf("felix: state_get answered with %T", res.msg)
	case v.Value == nil:
		return nil, 0, false, nil
	case v.Version == nil:
		return nil, 0, false, fmt.Errorf("felix: the broker sent state key %q without its version", m.Key)
	}
	return v.Value, *v.Version, true, nil
}

// commitStream is the stream of ops' event, "" without exactly one.
func commitStream(ops []CommitOp) string {
	s, n := "", 0
	for _, op := range ops {
		if op.op == wire.CommitOpPublish || op.op == wire.CommitOpEnqueue {
			s, n = op.stream, n+1
		}
	}
	if n != 1 {
		return ""
	}
	return s
}

// Commit is Client.Commit on the owner of the entity key's shard. It is
// sent again only when the first attempt never left the client, or the
// broker refused it saying nothing was written (not_leader, retry,
// redirect); a lost answer is returned as outcome_unknown, never re-sent.
func (cc *ClusterClient) Commit(ctx context.Context, namespace string, entityKey []byte, ops []CommitOp) (offset uint64, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, commitStream(ops), entityKey, 0), wasNotSent, func(c *Client) (err error) {
		offset, err = c.Commit(ctx, namespace, entityKey, ops)
		return err
	})
	return offset, err
}

// CommitIf is Client.CommitIf on the owner, sent again only as Commit is.
func (cc *ClusterClient) CommitIf(ctx context.Context, namespace string, entityKey []byte, ops []CommitOp, expected uint64) (offset uint64, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, commitStream(ops), entityKey, 0), wasNotSent, func(c *Client) (err error) {
		offset, err = c.CommitIf(ctx, namespace, entityKey, ops, expected)
		return err
	})
	return offset, err
}

// CommitOnShard is Client.CommitOnShard on the shard's owner.
func (cc *ClusterClient) CommitOnShard(ctx context.Context, namespace string, shard uint32, ops []CommitOp) (offset uint64, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, commitStream(ops), nil, shard), wasNotSent, func(c *Client) (err error) {
		offset, err = c.CommitOnShard(ctx, namespace, shard, ops)
		return err
	})
	return offset, err
}

// CommitIfOnShard is Client.CommitIfOnShard on the shard's owner.
func (cc *ClusterClient) CommitIfOnShard(ctx context.Context, namespace string, shard uint32, ops []CommitOp, expected uint64) (offset uint64, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, commitStream(ops), nil, shard), wasNotSent, func(c *Client) (err error) {
		offset, err = c.CommitIfOnShard(ctx, namespace, shard, ops, expected)
		return err
	})
	return offset, err
}

// StateGet is Client.StateGet on the owner of the entity key's shard.
func (cc *ClusterClient) StateGet(ctx context.Context, namespace, stream string, entityKey []byte, key string) (value []byte, version uint64, found bool, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, entityKey, 0), always, func(c *Client) (err error) {
		value, version, found, err = c.StateGet(ctx, namespace, stream, entityKey, key)
		return err
	})
	return value, version, found, err
}

// StateGetOnShard is Client.StateGetOnShard on the shard's owner.
func (cc *ClusterClient) StateGetOnShard(ctx context.Context, namespace, stream string, shard uint32, key string) (value []byte, version uint64, found bool, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), always, func(c *Client) (err error) {
		value, version, found, err = c.StateGetOnShard(ctx, namespace, stream, shard, key)
		return err
	})
	return value, version, found, err
}

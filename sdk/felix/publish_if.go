package felix

import (
	"context"
	"errors"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Conditional publishes (FEATURE_PUBLISH_CONDITIONAL).
//
// PublishIf appends a batch only if it would start at the expected offset,
// the shard's next: a single writer that must not append after it has
// been replaced keeps the offset after its last write and passes it. Of
// writers racing at one offset exactly one is written; the others get an
// *OffsetMismatchError naming the shard's tail, and nothing of theirs was
// written. The batch goes to a durable stream's shard owner and is never
// forwarded between brokers. A PublishIf whose answer was lost (the
// connection failed after it was sent) may have been written: it fails
// with a *BrokerError of retry class outcome_unknown and is never sent
// again by this package; read the shard at the expected offset to learn
// what happened.

// OffsetMismatchError is a conditional publish refused because the shard's
// next offset was Tail, not Expected. Nothing was written. It unwraps to a
// *BrokerError of code offset_mismatch (retry class fatal) whose detail is
// {"offset_mismatch": {"tail": Tail}}, so errors.As finds either.
type OffsetMismatchError struct {
	Expected uint64
	Tail     uint64
}

// Error implements error.
func (e *OffsetMismatchError) Error() string {
	return fmt.Sprintf("felix: offset mismatch: expected the shard's next offset to be %d, it is %d; nothing was written", e.Expected, e.Tail)
}

// Unwrap returns the refusal as a *BrokerError of code offset_mismatch.
func (e *OffsetMismatchError) Unwrap() error {
	return &BrokerError{Code: wire.CodeOffsetMismatch, Retry: wire.RetryFatal, Message: e.Error(),
		Detail: map[string]any{wire.DetailOffsetMismatch: map[string]any{"tail": e.Tail}}}
}

// PublishIf publishes payloads as one batch to the shard key picks (shard
// 0 for a nil key) only if the batch would start at offset expected, and
// returns that offset once the batch is durable. A shard whose next
// offset differs refuses it with an *OffsetMismatchError. It needs a
// durable stream and a broker that advertised FEATURE_PUBLISH_CONDITIONAL
// (otherwise it fails with a *BrokerError of code unsupported, sending
// nothing), and is served only by the shard's owner: elsewhere it fails
// with a *NotLeaderError (ClusterClient.PublishIf follows it).
func (c *Client) PublishIf(ctx context.Context, namespace, stream string, key []byte, payloads [][]byte, expected uint64) (uint64, error) {
	m := &wire.PublishIf{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, Key: key, Payloads: payloads, ExpectedOffset: &expected}
	return c.publishIf(ctx, m)
}

// PublishIfOnShard is PublishIf on the shard given, for a writer that
// keeps one shard per partition. A shard the stream does not have is
// refused (invalid_request), never wrapped. It also needs
// FEATURE_EXPLICIT_SHARD.
func (c *Client) PublishIfOnShard(ctx context.Context, namespace, stream string, shard uint32, payloads [][]byte, expected uint64) (uint64, error) {
	if err := c.needFeature(wire.FeatureExplicitShard, "explicit shards (FEATURE_EXPLICIT_SHARD)"); err != nil {
		return 0, err
	}
	m := &wire.PublishIf{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, Shard: &shard, Payloads: payloads, ExpectedOffset: &expected}
	return c.publishIf(ctx, m)
}

func (c *Client) publishIf(ctx context.Context, m *wire.PublishIf) (uint64, error) {
	if err := c.needFeature(wire.FeaturePublishConditional, "publish_if (FEATURE_PUBLISH_CONDITIONAL)"); err != nil {
		return 0, err
	}
	if m.Payloads == nil {
		m.Payloads = [][]byte{}
	}
	for i, p := range m.Payloads {
		if p == nil {
			m.Payloads[i] = []byte{}
		}
	}
	// Base64 grows a payload by a third; the rest of the message is small.
	size := 256 + len(m.Namespace) + len(m.Stream) + len(m.TenantID) + 2*len(m.Key)
	for _, p := range m.Payloads {
		size += (len(p)+2)/3*4 + 3
	}
	if uint64(size) > uint64(c.cfg.MaxFrameBytes) {
		return 0, invalidArg("publish_if of about %d encoded bytes is larger than MaxFrameBytes %d", size, c.cfg.MaxFrameBytes)
	}
	expected := *m.ExpectedOffset
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		if !wasNotSent(err) && errors.Is(err, ErrConnectionLost) {
			return 0, writeOutcomeUnknown("publish_if", err)
		}
		return 0, err
	}
	switch a := res.msg.(type) {
	case *wire.PublishOK:
		if a.Offset == nil {
			return 0, fmt.Errorf("felix: the broker wrote a publish_if without saying where")
		}
		if *a.Offset != expected {
			return 0, fmt.Errorf("felix: the broker wrote a publish_if expected at %d at offset %d", expected, *a.Offset)
		}
		publishTotal.Add(len(m.Payloads))
		return *a.Offset, nil
	case *wire.PublishRefused:
		if a.OffsetMismatch == nil {
			return 0, fromWire(a.Err())
		}
		return 0, &OffsetMismatchError{Expected: expected, Tail: a.OffsetMismatch.Tail}
	}
	return 0, fmt.Errorf("felix: publish_if answered with %T", res.msg)
}

// PublishIf is Client.PublishIf on the owner of the key's shard. It is
// sent again only when the first attempt never left the client, or the
// broker refused it saying nothing was written (not_leader, retry,
// redirect); a lost answer is returned as outcome_unknown, never re-sent.
func (cc *ClusterClient) PublishIf(ctx context.Context, namespace, stream string, key []byte, payloads [][]byte, expected uint64) (offset uint64, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, key, 0), wasNotSent, func(c *Client) (err error) {
		offset, err = c.PublishIf(ctx, namespace, stream, key, payloads, expected)
		return err
	})
	return offset, err
}

// PublishIfOnShard is Client.PublishIfOnShard on the shard's owner, sent
// again only as PublishIf is.
func (cc *ClusterClient) PublishIfOnShard(ctx context.Context, namespace, stream string, shard uint32, payloads [][]byte, expected uint64) (offset uint64, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), wasNotSent, func(c *Client) (err error) {
		offset, err = c.PublishIfOnShard(ctx, namespace, stream, shard, payloads, expected)
		return err
	})
	return offset, err
}

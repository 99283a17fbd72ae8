package felix

import (
	"context"
	"time"
)

// groupCalls are the per-shard group calls *Client and *ClusterClient
// share.
type groupCalls interface {
	GroupPoll(ctx context.Context, namespace, stream string, shard uint32, group string, maxRecords int, opts GroupPollOptions) ([]GroupRecord, error)
	GroupAck(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error
	GroupNack(ctx context.Context, namespace, stream string, shard uint32, group string, rec GroupRecord, delay time.Duration) error
	GroupExtend(ctx context.Context, namespace, stream string, shard uint32, group string, rec GroupRecord, extend time.Duration) (time.Duration, error)
	GroupDeadLetter(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error
}

// Group is one consumer group on one shard of a durable stream, bound to
// the client that made it. It holds no state of its own: every call is
// the client's Group* call with the group's names.
type Group struct {
	calls     groupCalls
	namespace string
	stream    string
	shard     uint32
	name      string
}

// Group returns the consumer group name on shard of stream.
func (c *Client) Group(namespace, stream string, shard uint32, name string) *Group {
	return &Group{calls: c, namespace: namespace, stream: stream, shard: shard, name: name}
}

// Group returns the consumer group name on shard of stream; its calls go
// to the shard's owner.
func (cc *ClusterClient) Group(namespace, stream string, shard uint32, name string) *Group {
	return &Group{calls: cc, namespace: namespace, stream: stream, shard: shard, name: name}
}

// Poll claims up to maxRecords records (Client.GroupPoll).
func (g *Group) Poll(ctx context.Context, maxRecords int, opts GroupPollOptions) ([]GroupRecord, error) {
	return g.calls.GroupPoll(ctx, g.namespace, g.stream, g.shard, g.name, maxRecords, opts)
}

// Ack finishes rec (Client.GroupAck).
func (g *Group) Ack(ctx context.Context, rec GroupRecord) error {
	return g.calls.GroupAck(ctx, g.namespace, g.stream, g.shard, g.name, rec.Offset)
}

// Nack hands rec back, redelivered after delay (Client.GroupNack).
func (g *Group) Nack(ctx context.Context, rec GroupRecord, delay time.Duration) error {
	return g.calls.GroupNack(ctx, g.namespace, g.stream, g.shard, g.name, rec, delay)
}

// Extend keeps the claim on rec standing for extend (Client.GroupExtend).
func (g *Group) Extend(ctx context.Context, rec GroupRecord, extend time.Duration) (time.Duration, error) {
	return g.calls.GroupExtend(ctx, g.namespace, g.stream, g.shard, g.name, rec, extend)
}

// DeadLetter lists rec as a dead letter and finishes it
// (Client.GroupDeadLetter).
func (g *Group) DeadLetter(ctx context.Context, rec GroupRecord) error {
	return g.calls.GroupDeadLetter(ctx, g.namespace, g.stream, g.shard, g.name, rec.Offset)
}

// ConsumeOptions tune Consume. Zero fields take the defaults.
type ConsumeOptions struct {
	// MaxRecords is how many records one poll claims (default 32).
	MaxRecords int
	// Wait is how long one poll may wait for work (default 5 s).
	Wait time.Duration
	// Visibility is how long each claim stands (default: the broker's).
	Visibility time.Duration
}

// Consume polls the group and calls handler for each record, one at a
// time in the order polled, until ctx ends: a record the handler returns
// nil for is acked, one it returns an error for is nacked for immediate
// redelivery (naming its delivery). An ack or nack refused stale_claim
// (the claim lapsed while the handler ran) is skipped: the record comes
// round again. It returns nil once ctx ends, or the first other error.
// Delivery is at least once: a handler must expect a record twice.
func (g *Group) Consume(ctx context.Context, handler func(context.Context, GroupRecord) error, opts ConsumeOptions) error {
	return consume(ctx, g.Poll, g.Ack, g.Nack, handler, opts, staleClaim)
}

// consume is the loop of Group.Consume and ShardedGroup.Consume: skip
// says which ack or nack failures pass over the record rather than end
// the loop.
func consume(ctx context.Context, poll func(context.Context, int, GroupPollOptions) ([]GroupRecord, error),
	ack func(context.Context, GroupRecord) error, nack func(context.Context, GroupRecord, time.Duration) error,
	handler func(context.Context, GroupRecord) error, opts ConsumeOptions, skip func(error) bool) error {
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = 32
	}
	if opts.Wait <= 0 {
		opts.Wait = 5 * time.Second
	}
	for ctx.Err() == nil {
		recs, err := poll(ctx, opts.MaxRecords, GroupPollOptions{Wait: opts.Wait, Visibility: opts.Visibility})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if herr := handler(ctx, rec); herr == nil {
				err = ack(ctx, rec)
			} else {
				err = nack(ctx, rec, 0)
			}
			if ctx.Err() != nil {
				return nil
			}
			if err != nil && !skip(err) {
				return err
			}
		}
	}
	return nil
}

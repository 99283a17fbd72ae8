package felix

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// A group lives on one shard; these calls run one group call on every
// shard of a stream: the width stream_shards reports (one shard on a
// broker that does not serve it), each shard's call on that shard's owner
// (ClusterClient; following not_leader as its per-shard calls do) or on
// the one broker (Client). The shards are asked concurrently, at most
// streamCallsInFlight at a time, and the answers come back in shard
// order. A shard that fails does not stop the others: its error is
// joined, naming the shard, into the error returned beside the answers of
// the shards that worked (a failed shard's slot holds the zero value):
// the error is an errors.Join of one *ShardError per failed shard.

// streamCallsInFlight bounds the shards asked at once by a stream call.
const streamCallsInFlight = 16

// GroupPosition is where a seek or create left a group on one shard.
type GroupPosition struct {
	Shard uint32
	// Offset is the group's cursor on the shard.
	Offset uint64
	// Moved says the call moved (or created) the group; false for a
	// create that found the group already there.
	Moved bool
}

// ShardError is one shard's failure in a call made on every shard of a
// stream.
type ShardError struct {
	Shard uint32
	Err   error
}

// Error implements error.
func (e *ShardError) Error() string { return fmt.Sprintf("shard %d: %v", e.Shard, e.Err) }

// Unwrap returns Err.
func (e *ShardError) Unwrap() error { return e.Err }

// FailedShards returns the *ShardError values err (from a call made on
// every shard of a stream) joins, in shard order.
func FailedShards(err error) []*ShardError {
	var out []*ShardError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if se, ok := e.(*ShardError); ok {
				out = append(out, se)
			}
		}
	}
	return out
}

// groupAdmin is the per-shard group calls the stream calls run.
type groupAdmin interface {
	GroupSeek(ctx context.Context, namespace, stream string, shard uint32, group string, start GroupStart, ifNew bool) (uint64, bool, error)
	GroupDescribe(ctx context.Context, namespace, stream string, shard uint32, group string) (GroupInfo, error)
	GroupDelete(ctx context.Context, namespace, stream string, shard uint32, group string) (bool, error)
}

// eachShard runs call for shards 0..n-1, at most streamCallsInFlight at
// once, and returns their answers in shard order with their errors joined.
func eachShard[T any](ctx context.Context, n uint32, call func(ctx context.Context, shard uint32) (T, error)) ([]T, error) {
	out := make([]T, n)
	errs := make([]error, n)
	sem := make(chan struct{}, streamCallsInFlight)
	var wg sync.WaitGroup
	for shard := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			v, err := call(ctx, shard)
			if err != nil {
				errs[shard] = &ShardError{Shard: shard, Err: err}
				return
			}
			out[shard] = v
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// streamWidth is how many shards the stream has for a Client: what
// stream_shards says, or one when the broker does not serve it.
func (c *Client) streamWidth(ctx context.Context, namespace, stream string) (uint32, error) {
	n, err := c.StreamShards(ctx, namespace, stream)
	return shardWidth(namespace, stream, n, err)
}

func seekStream(ctx context.Context, ga groupAdmin, n uint32, namespace, stream, group string, start GroupStart, ifNew bool) ([]GroupPosition, error) {
	return eachShard(ctx, n, func(ctx context.Context, shard uint32) (GroupPosition, error) {
		off, moved, err := ga.GroupSeek(ctx, namespace, stream, shard, group, start, ifNew)
		return GroupPosition{Shard: shard, Offset: off, Moved: moved}, err
	})
}

func describeStream(ctx context.Context, ga groupAdmin, n uint32, namespace, stream, group string) ([]GroupInfo, error) {
	return eachShard(ctx, n, func(ctx context.Context, shard uint32) (GroupInfo, error) {
		info, err := ga.GroupDescribe(ctx, namespace, stream, shard, group)
		info.Shard = shard
		return info, err
	})
}

func deleteStream(ctx context.Context, ga groupAdmin, n uint32, namespace, stream, group string) ([]bool, error) {
	return eachShard(ctx, n, func(ctx context.Context, shard uint32) (bool, error) {
		return ga.GroupDelete(ctx, namespace, stream, shard, group)
	})
}

// GroupCreateStream creates the group at start on every shard of the
// stream where it does not exist yet (GroupCreate per shard). start
// GroupAt(n) names offset n on every shard.
func (cc *ClusterClient) GroupCreateStream(ctx context.Context, namespace, stream, group string, start GroupStart) ([]GroupPosition, error) {
	n, err := cc.streamShardCount(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return seekStream(ctx, cc, n, namespace, stream, group, start, true)
}

// GroupSeekStream moves the group to start on every shard of the stream
// (GroupSeek per shard), voiding the claims standing on each.
func (cc *ClusterClient) GroupSeekStream(ctx context.Context, namespace, stream, group string, start GroupStart) ([]GroupPosition, error) {
	n, err := cc.streamShardCount(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return seekStream(ctx, cc, n, namespace, stream, group, start, false)
}

// GroupDescribeStream returns the group's state on every shard of the
// stream, in shard order (GroupDescribe per shard).
func (cc *ClusterClient) GroupDescribeStream(ctx context.Context, namespace, stream, group string) ([]GroupInfo, error) {
	n, err := cc.streamShardCount(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return describeStream(ctx, cc, n, namespace, stream, group)
}

// GroupDeleteStream deletes the group on every shard of the stream and
// reports, in shard order, where it existed (GroupDelete per shard).
func (cc *ClusterClient) GroupDeleteStream(ctx context.Context, namespace, stream, group string) ([]bool, error) {
	n, err := cc.streamShardCount(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return deleteStream(ctx, cc, n, namespace, stream, group)
}

// GroupCreateStream is ClusterClient.GroupCreateStream on this broker
// alone, for a broker that leads every shard of the stream (felix serve).
func (c *Client) GroupCreateStream(ctx context.Context, namespace, stream, group string, start GroupStart) ([]GroupPosition, error) {
	n, err := c.streamWidth(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return seekStream(ctx, c, n, namespace, stream, group, start, true)
}

// GroupSeekStream is ClusterClient.GroupSeekStream on this broker alone.
func (c *Client) GroupSeekStream(ctx context.Context, namespace, stream, group string, start GroupStart) ([]GroupPosition, error) {
	n, err := c.streamWidth(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return seekStream(ctx, c, n, namespace, stream, group, start, false)
}

// GroupDescribeStream is ClusterClient.GroupDescribeStream on this broker
// alone.
func (c *Client) GroupDescribeStream(ctx context.Context, namespace, stream, group string) ([]GroupInfo, error) {
	n, err := c.streamWidth(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return describeStream(ctx, c, n, namespace, stream, group)
}

// GroupDeleteStream is ClusterClient.GroupDeleteStream on this broker
// alone.
func (c *Client) GroupDeleteStream(ctx context.Context, namespace, stream, group string) ([]bool, error) {
	n, err := c.streamWidth(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return deleteStream(ctx, c, n, namespace, stream, group)
}

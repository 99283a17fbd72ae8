package felix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// ShardedOptions choose where SubscribeSharded starts each shard.
type ShardedOptions struct {
	// Start is where a shard without a position starts (Latest by
	// default).
	Start StartPosition
	// Positions resumes shards at these offsets: pass what Positions
	// returned to carry on after the last events Next returned.
	Positions map[uint32]uint64
}

// ShardNoticeKind says what happened to a shard.
type ShardNoticeKind int

// Shard notices.
const (
	// ShardRecovered: the shard's stream was lost (its connection died,
	// its broker drained, it lagged) and carries on at From.
	ShardRecovered ShardNoticeKind = iota + 1
	// ShardMovedTo: the shard moved to another broker (Err is the
	// *ShardMovedError naming it) and carries on there at From.
	ShardMovedTo
	// ShardLost: the shard's stream ended for good (Err says why); the
	// other shards carry on without it.
	ShardLost
)

// ShardNotice is what ShardedSubscription.Next (and a multi-shard
// ClusterCacheWatch's Next) returns, as its error, when something
// happened to one shard: see ShardNoticeKind. It never ends the merged
// stream: call Next again.
type ShardNotice struct {
	Shard uint32
	Kind  ShardNoticeKind
	// Ended is Kind == ShardLost.
	Ended bool
	// From is where a recovered or moved shard carries on.
	From uint64
	// Err is why: the *ShardMovedError of a move, the end of a lost
	// shard, what a recovered shard recovered from.
	Err error
}

// Error implements error.
func (n *ShardNotice) Error() string {
	switch n.Kind {
	case ShardLost:
		return fmt.Sprintf("felix: shard %d lost: %v", n.Shard, n.Err)
	case ShardMovedTo:
		return fmt.Sprintf("felix: shard %d moved, carrying on at offset %d: %v", n.Shard, n.From, n.Err)
	}
	return fmt.Sprintf("felix: shard %d recovered at offset %d", n.Shard, n.From)
}

// Unwrap returns Err.
func (n *ShardNotice) Unwrap() error { return n.Err }

// resumedNotice reports a shard that resumed after cause.
func resumedNotice(shard uint32, from uint64, cause error) *ShardNotice {
	kind := ShardRecovered
	if _, ok := errors.AsType[*ShardMovedError](cause); ok {
		kind = ShardMovedTo
	}
	return &ShardNotice{Shard: shard, Kind: kind, From: from, Err: cause}
}

// ShardedSubscription reads every shard of a stream: one
// ClusterSubscription per shard, each on its shard's owner and each
// resuming on its own, merged into one Next. Events carry their Shard.
// Order holds within a shard only. Positions gives, per shard, the offset
// after the last event Next returned; SubscribeSharded with those
// Positions carries on from there. A shard that resumes or ends is
// reported by a *ShardNotice from Next, never silently; once every shard
// has ended, Next returns ErrSubscriptionLost.
//
// Next is safe to call from one goroutine at a time; Positions and Close
// from any.
type ShardedSubscription struct {
	m merge[Event]
}

// SubscribeSharded subscribes to every shard of namespace/stream (the
// count stream_shards reports; one shard on a broker that does not serve
// it) and merges them (see ShardedSubscription). A shard refused for a
// reason a retry may cure (its owner still opening it) is asked again
// with the resume backoff; a shard still refused after the last attempt,
// or refused for good, fails the call, closing the others.
func (cc *ClusterClient) SubscribeSharded(ctx context.Context, namespace, stream string, o ShardedOptions) (*ShardedSubscription, error) {
	n, err := cc.streamShardCount(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	pos := map[uint32]uint64{}
	subs := make([]*ClusterSubscription, 0, n)
	for shard := range n {
		start := o.Start
		if p, ok := o.Positions[shard]; ok {
			start = AtOffset(p)
			pos[shard] = p
		}
		sub, err := cc.subscribeRetried(ctx, namespace, stream, SubscribeOptions{Start: start, Shard: shard})
		if err != nil {
			for _, s := range subs {
				_ = s.Close()
			}
			return nil, fmt.Errorf("felix: subscribe shard %d: %w", shard, err)
		}
		subs = append(subs, sub)
	}
	ss := &ShardedSubscription{}
	for _, s := range subs {
		ss.m.children = append(ss.m.children, s)
	}
	ss.m.admit = func(_ uint32, ev *Event) (uint64, bool) { return ev.Offset + 1, ev.HasOffset }
	ss.m.start(pos)
	return ss, nil
}

// subscribeRetried is SubscribeFrom, asked again with the resume backoff
// while the refusal says a later attempt may work (a shard whose owner is
// still opening it, a broker still learning of the stream), up to
// maxResumeAttempts.
func (cc *ClusterClient) subscribeRetried(ctx context.Context, namespace, stream string, o SubscribeOptions) (*ClusterSubscription, error) {
	delay := cc.resumeBase
	for attempt := 1; ; attempt++ {
		sub, err := cc.SubscribeFrom(ctx, namespace, stream, o)
		if err == nil || attempt >= maxResumeAttempts || !retryableResume(err) {
			return sub, err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		delay = min(2*delay, cc.resumeMax)
	}
}

// streamShardCount asks the entry broker how many shards the stream has.
func (cc *ClusterClient) streamShardCount(ctx context.Context, namespace, stream string) (n uint32, err error) {
	err = cc.do(ctx, always, func(c *Client) (err error) {
		n, err = c.StreamShards(ctx, namespace, stream)
		return err
	})
	return shardWidth(namespace, stream, n, err)
}

// shardWidth judges a stream_shards answer: the stream's width; 1 from a
// broker not in a cluster (its shards are unknown: shard 0 is read); a
// stream the broker does not know is not_found.
func shardWidth(namespace, stream string, n uint32, err error) (uint32, error) {
	switch {
	case ignoreUnsupported(err) == nil && err != nil:
		return 1, nil
	case err != nil:
		return 0, err
	case n == 0:
		return 0, &BrokerError{Code: wire.CodeNotFound, Retry: wire.RetryFatal,
			Message: fmt.Sprintf("the broker knows no stream %s/%s", namespace, stream)}
	}
	return n, nil
}

// Next returns the next event of any shard, or a *ShardNotice about one
// shard (see the type's doc). It is cancel-safe: nothing is lost when ctx
// ends.
func (ss *ShardedSubscription) Next(ctx context.Context) (Event, error) {
	return ss.m.next(ctx, func(ev Event) uint32 { return ev.Shard })
}

// Positions returns, per shard, the offset after the last event Next
// returned (or the position it started from); shards that delivered no
// offset yet are absent.
func (ss *ShardedSubscription) Positions() map[uint32]uint64 { return ss.m.positions() }

// Shards returns how many shards the subscription reads.
func (ss *ShardedSubscription) Shards() int { return len(ss.m.children) }

// Resumes returns how many times the shards' subscriptions resubscribed.
func (ss *ShardedSubscription) Resumes() int { return ss.m.resumes() }

// Close ends every shard's subscription and waits for the merge to stop;
// Next returns ErrClosed afterwards.
func (ss *ShardedSubscription) Close() error { return ss.m.close() }

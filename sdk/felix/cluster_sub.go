package felix

import (
	"context"
	"errors"
)

// ClusterSubscription is a subscription opened through a ClusterClient. On
// a durable stream it survives what would end a plain Subscription: when
// the broker ends it with *SubscriptionLagged, or its connection is lost,
// it subscribes again (on a fresh connection if needed) right after the
// last event it delivered, so Next carries on with no gap and no
// duplicate. It can resume once it knows a position: an event with an
// offset was delivered, or the subscribe reported a start offset (or, for
// a lag before any event, the broker's resume point). Without one (a
// stream without offsets, or a durable stream subscribed at the tail that
// has delivered nothing yet) it ends as a Subscription does. A
// *SubscribeCursorError met while resuming (retention passed the resume
// point) is returned by Next, as are refusals that retrying cannot cure.
//
// Next is safe to call from one goroutine at a time; Close from any.
type ClusterSubscription struct {
	r resumable[Event, *Subscription]

	namespace string
	stream    string
	shard     uint32

	startOffset, liveOffset *uint64 // reported by the first subscribe

	// Owned by the goroutine calling Next.
	last    uint64 // offset of the last delivered event, valid when hasLast
	hasLast bool
	from    uint64 // where a resume subscribes, valid when fromOK
	fromOK  bool
	hint    string // the new owner a shard_moved named, for the next resume
}

func newClusterSubscription(cc *ClusterClient, sub *Subscription, shard uint32) *ClusterSubscription {
	cs := &ClusterSubscription{namespace: sub.namespace, stream: sub.stream, shard: shard,
		startOffset: sub.startOffset, liveOffset: sub.liveOffset}
	cs.from, cs.fromOK = sub.StartOffset()
	cs.r.init(cc, sub)
	cs.r.what, cs.r.metric = "subscription", subscriptionResumes
	cs.r.open, cs.r.point, cs.r.admit, cs.r.resumed = cs.subscribeAt, cs.resumePoint, cs.admit, cs.resumedAt
	cs.r.via = cs.via
	return cs
}

// via opens the subscription again on its shard's owner: the one a
// shard_moved named, else the one the client knows.
func (cs *ClusterSubscription) via(ctx context.Context, open func(*Client) (*Subscription, error)) (*Subscription, error) {
	hint := cs.hint
	cs.hint = ""
	return openRouted(ctx, cs.r.cc, streamRoute(cs.namespace, cs.stream, nil, cs.shard), hint, open)
}

// ID returns the broker-assigned id of the current underlying
// subscription; it changes when the subscription resumes.
func (cs *ClusterSubscription) ID() uint64 {
	sub, ok := cs.r.current()
	if !ok {
		return 0
	}
	return sub.ID()
}

// StartOffset is Subscription.StartOffset of the first subscribe.
func (cs *ClusterSubscription) StartOffset() (uint64, bool) { return maybe(cs.startOffset) }

// LiveOffset is Subscription.LiveOffset of the first subscribe.
func (cs *ClusterSubscription) LiveOffset() (uint64, bool) { return maybe(cs.liveOffset) }

// Resumes returns how many times the subscription resubscribed.
func (cs *ClusterSubscription) Resumes() int { return int(cs.r.resumes.Load()) }

// Next returns the next event, resuming the subscription when it can (see
// the type's doc). It is cancel-safe like Subscription.Next; a ctx that
// ends during a resume returns ctx's error, and the next call resumes
// again.
func (cs *ClusterSubscription) Next(ctx context.Context) (Event, error) { return cs.r.next(ctx) }

// admit records a delivered event and drops one that repeats an event
// delivered before a resume.
func (cs *ClusterSubscription) admit(ev Event) (deliver, progress bool) {
	if !ev.HasOffset {
		return true, false
	}
	if cs.hasLast && ev.Offset <= cs.last {
		return false, false
	}
	cs.last, cs.hasLast = ev.Offset, true
	cs.from, cs.fromOK = ev.Offset+1, true
	return true, true
}

// resumePoint says where to resubscribe after the subscription ended with
// err, or false when it cannot resume.
func (cs *ClusterSubscription) resumePoint(_ *Subscription, err error) (uint64, bool) {
	if moved, ok := errors.AsType[*ShardMovedError](err); ok {
		return cs.movedPoint(moved)
	}
	var lagged *SubscriptionLagged
	isLag := errors.As(err, &lagged)
	if !isLag && !errors.Is(err, ErrSubscriptionLost) && !errors.Is(err, ErrConnectionLost) {
		return 0, false
	}
	switch {
	case cs.fromOK:
		return cs.from, true
	case isLag:
		return lagged.ResumeFrom, true
	}
	return 0, false
}

// movedPoint says where to resubscribe after the shard moved: at
// max(last delivered + 1, ResumeFrom), on the new owner. A stream without
// offsets cannot resume; the ShardMovedError, an ErrSubscriptionLost, is
// returned by Next.
func (cs *ClusterSubscription) movedPoint(moved *ShardMovedError) (uint64, bool) {
	cs.hint = moved.Addr
	if oc := cs.r.cc.owners; oc != nil {
		oc.drop(ownerKey{kind: KindStream, namespace: cs.namespace, name: cs.stream}, cs.shard)
	}
	switch {
	case moved.ResumeFrom != nil && cs.fromOK:
		return max(cs.from, *moved.ResumeFrom), true
	case cs.fromOK:
		return cs.from, true
	case moved.ResumeFrom != nil:
		return *moved.ResumeFrom, true
	}
	return 0, false
}

// subscribeAt subscribes at from on c.
func (cs *ClusterSubscription) subscribeAt(ctx context.Context, c *Client, from uint64) (*Subscription, error) {
	return c.SubscribeFrom(ctx, cs.namespace, cs.stream, SubscribeOptions{Start: AtOffset(from), Shard: cs.shard})
}

func (cs *ClusterSubscription) resumedAt(from uint64) { cs.from, cs.fromOK = from, true }

// Close ends the subscription; Next returns ErrClosed afterwards.
func (cs *ClusterSubscription) Close() error { return cs.r.close() }

func (cs *ClusterSubscription) notifyResumes(f func(from uint64, cause error)) { cs.r.notify = f }

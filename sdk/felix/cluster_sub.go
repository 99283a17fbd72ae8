package felix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// Resume bounds. A resume that keeps failing (or keeps ending before it
// delivers anything) backs off from resumeBackoffBase, doubling up to
// resumeBackoffMax, and gives up after maxResumeAttempts in a row.
const (
	maxResumeAttempts = 10
	resumeBackoffBase = 50 * time.Millisecond
	resumeBackoffMax  = 2 * time.Second
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
	cc        *ClusterClient
	namespace string
	stream    string
	shard     uint32

	startOffset, liveOffset *uint64 // reported by the first subscribe

	// Owned by the goroutine calling Next.
	last     uint64 // offset of the last delivered event, valid when hasLast
	hasLast  bool
	from     uint64 // where a resume subscribes, valid when canResume
	fromOK   bool
	failures int // resume attempts since an event was last delivered

	resumes atomic.Int64

	ctx    context.Context // ends on Close
	cancel context.CancelFunc

	mu     sync.Mutex
	cur    *Subscription // nil once closed
	closed bool
}

func newClusterSubscription(cc *ClusterClient, sub *Subscription, shard uint32) *ClusterSubscription {
	ctx, cancel := context.WithCancel(context.Background())
	cs := &ClusterSubscription{cc: cc, namespace: sub.namespace, stream: sub.stream, shard: shard,
		startOffset: sub.startOffset, liveOffset: sub.liveOffset, ctx: ctx, cancel: cancel, cur: sub}
	cs.from, cs.fromOK = sub.StartOffset()
	return cs
}

// ID returns the broker-assigned id of the current underlying
// subscription; it changes when the subscription resumes.
func (cs *ClusterSubscription) ID() uint64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.cur == nil {
		return 0
	}
	return cs.cur.ID()
}

// StartOffset is Subscription.StartOffset of the first subscribe.
func (cs *ClusterSubscription) StartOffset() (uint64, bool) { return maybe(cs.startOffset) }

// LiveOffset is Subscription.LiveOffset of the first subscribe.
func (cs *ClusterSubscription) LiveOffset() (uint64, bool) { return maybe(cs.liveOffset) }

// Resumes returns how many times the subscription resubscribed.
func (cs *ClusterSubscription) Resumes() int { return int(cs.resumes.Load()) }

// Next returns the next event, resuming the subscription when it can (see
// the type's doc). It is cancel-safe like Subscription.Next; a ctx that
// ends during a resume returns ctx's error, and the next call resumes
// again.
func (cs *ClusterSubscription) Next(ctx context.Context) (Event, error) {
	for {
		sub := cs.current()
		if sub == nil {
			return Event{}, ErrClosed
		}
		ev, err := sub.Next(ctx)
		if err == nil {
			if cs.duplicate(ev) {
				continue
			}
			return ev, nil
		}
		from, ok := cs.resumePoint(err)
		if !ok {
			return Event{}, err
		}
		if ctx.Err() != nil { // the next call resumes
			return Event{}, ctx.Err()
		}
		if err := cs.resume(ctx, from, err); err != nil {
			return Event{}, err
		}
	}
}

func (cs *ClusterSubscription) current() *Subscription {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.cur
}

// duplicate records a delivered event and reports whether it repeats one
// delivered before a resume.
func (cs *ClusterSubscription) duplicate(ev Event) bool {
	if !ev.HasOffset {
		return false
	}
	if cs.hasLast && ev.Offset <= cs.last {
		return true
	}
	cs.last, cs.hasLast = ev.Offset, true
	cs.from, cs.fromOK = ev.Offset+1, true
	cs.failures = 0
	return false
}

// resumePoint says where to resubscribe after the subscription ended with
// err, or false when it cannot resume.
func (cs *ClusterSubscription) resumePoint(err error) (uint64, bool) {
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

// resume subscribes again at from, retrying with backoff while the
// failures are ones a retry can cure. cause is why the last one ended.
func (cs *ClusterSubscription) resume(ctx context.Context, from uint64, cause error) error {
	ctx, stop := cs.joinClose(ctx)
	defer stop()
	for {
		if cs.failures >= maxResumeAttempts {
			return fmt.Errorf("felix: could not resume the subscription at offset %d after %d attempts: %w", from, cs.failures, cause)
		}
		if err := cs.backoff(ctx); err != nil {
			return err
		}
		cs.failures++
		sub, err := cs.subscribeAt(ctx, from)
		if err == nil {
			return cs.swap(sub, from)
		}
		if cs.ctx.Err() != nil {
			return ErrClosed
		}
		if !retryableResume(err) {
			return err
		}
		cause = err
	}
}

// backoff waits before every attempt but the first since an event was
// delivered.
func (cs *ClusterSubscription) backoff(ctx context.Context) error {
	if cs.failures == 0 {
		return nil
	}
	d := cs.cc.resumeBase << min(cs.failures-1, 16)
	d = min(d, cs.cc.resumeMax)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		if cs.ctx.Err() != nil {
			return ErrClosed
		}
		return ctx.Err()
	}
}

// subscribeAt subscribes on a live connection, dropping a connection that
// turns out to be dead.
func (cs *ClusterSubscription) subscribeAt(ctx context.Context, from uint64) (*Subscription, error) {
	c, err := cs.cc.client(ctx)
	if err != nil {
		return nil, err
	}
	sub, err := c.SubscribeFrom(ctx, cs.namespace, cs.stream, SubscribeOptions{Start: AtOffset(from), Shard: cs.shard})
	if err != nil && errors.Is(err, ErrConnectionLost) {
		cs.cc.invalidate(c)
	}
	return sub, err
}

// swap makes sub current and closes the one that ended.
func (cs *ClusterSubscription) swap(sub *Subscription, from uint64) error {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		_ = sub.Close()
		return ErrClosed
	}
	old := cs.cur
	cs.cur = sub
	cs.mu.Unlock()
	_ = old.Close()
	cs.from, cs.fromOK = from, true
	cs.resumes.Add(1)
	subscriptionResumes.Inc()
	return nil
}

// joinClose returns ctx that also ends when the subscription is closed.
func (cs *ClusterSubscription) joinClose(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(cs.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// retryableResume reports whether a failed resubscribe may work later:
// the connection was lost, or the broker refused for a passing reason
// (a shard moving or a broker learning about the stream).
func retryableResume(err error) bool {
	if errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrSubscriptionLost) {
		return true
	}
	var be *BrokerError
	if !errors.As(err, &be) {
		return false
	}
	switch be.Retry {
	case wire.RetryRetry, wire.RetryRetryAfter, wire.RetryRedirect:
		return true
	}
	return be.Code == wire.CodeNotFound || be.Code == wire.CodeShardUnavailable || be.Code == wire.CodeNotLeader
}

// Close ends the subscription; Next returns ErrClosed afterwards.
func (cs *ClusterSubscription) Close() error {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return nil
	}
	cs.closed = true
	sub := cs.cur
	cs.cur = nil
	cs.mu.Unlock()
	cs.cancel()
	return sub.Close()
}

package felix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Resume bounds. A resume that keeps failing (or keeps ending before it
// delivers anything) backs off from resumeBackoffBase, doubling up to
// resumeBackoffMax, and gives up after maxResumeAttempts in a row: about
// 10 s in all, longer than a Quorum shard's failover takes with the
// default timings (its suspicion threshold is 5 s). The cap is short so
// that a subscription is back within a second of its shard's new leader
// serving, and a wait ends early when the client learns that a shard
// moved.
const (
	maxResumeAttempts = 14
	resumeBackoffBase = 50 * time.Millisecond
	resumeBackoffMax  = time.Second
)

// resumableStream is a stream a resumable replaces when it ends: a
// *Subscription or a *CacheWatch.
type resumableStream[T any] interface {
	comparable
	Next(ctx context.Context) (T, error)
	Close() error
}

// resumable is what a ClusterSubscription and a ClusterCacheWatch share:
// the current underlying stream S of items T, and opening it again on a
// live connection (with backoff, up to maxResumeAttempts in a row) when it
// ends for a reason a resume cures. The owner says where and how through
// its hooks, which run on the goroutine calling next.
type resumable[T any, S resumableStream[T]] struct {
	cc     *ClusterClient
	what   string           // "subscription", "cache watch": for errors
	metric *metrics.Counter // counts resumes

	// open opens the stream again at from on c.
	open func(ctx context.Context, c *Client, from uint64) (S, error)
	// point says where to open again after cur ended with err, or false
	// when it cannot resume.
	point func(cur S, err error) (uint64, bool)
	// admit records an item cur returned: deliver false drops it (it
	// repeats one delivered before a resume); progress true means the
	// stream moved, so a later end starts a fresh run of attempts.
	admit func(it T) (deliver, progress bool)
	// resumed records that the stream now runs from from.
	resumed func(from uint64)
	// notify, when set, hears of every resume, on the goroutine calling
	// next, before the resumed stream's first item: where it carries on
	// and why it had ended.
	notify func(from uint64, cause error)
	// via runs open on the broker the stream belongs on; nil means the
	// entry broker.
	via func(ctx context.Context, open func(*Client) (S, error)) (S, error)

	failures int // resume attempts since the stream last made progress
	resumes  atomic.Int64

	ctx    context.Context // ends on Close
	cancel context.CancelFunc

	mu      sync.Mutex
	cur     S // the zero S once closed
	closed  bool
	lastEnd error // why the stream last ended and was resumed
}

// endedBy returns why the stream last ended before a resume, or nil.
func (r *resumable[T, S]) endedBy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastEnd
}

func (r *resumable[T, S]) init(cc *ClusterClient, first S) {
	r.cc, r.cur = cc, first
	r.ctx, r.cancel = context.WithCancel(context.Background())
}

// current returns the current stream, or false once closed.
func (r *resumable[T, S]) current() (S, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur, !r.closed
}

// next returns the next item, resuming the stream when it can. It is
// cancel-safe: a ctx that ends during a resume returns ctx's error, and
// the next call resumes again.
func (r *resumable[T, S]) next(ctx context.Context) (T, error) {
	var zero T
	for {
		cur, ok := r.current()
		if !ok {
			return zero, ErrClosed
		}
		it, err := cur.Next(ctx)
		if err == nil {
			deliver, progress := r.admit(it)
			if progress {
				r.failures = 0
			}
			if !deliver {
				continue
			}
			return it, nil
		}
		from, ok := r.point(cur, err)
		if !ok {
			return zero, err
		}
		if ctx.Err() != nil { // the next call resumes
			return zero, ctx.Err()
		}
		r.mu.Lock()
		r.lastEnd = err
		r.mu.Unlock()
		if err := r.resume(ctx, from, err); err != nil {
			return zero, err
		}
	}
}

// resume opens the stream again at from, retrying with backoff while the
// failures are ones a retry can cure. cause is why the last one ended.
func (r *resumable[T, S]) resume(ctx context.Context, from uint64, cause error) error {
	ctx, stop := r.joinClose(ctx)
	defer stop()
	for {
		if r.failures >= maxResumeAttempts {
			return fmt.Errorf("felix: could not resume the %s at offset %d after %d attempts: %w", r.what, from, r.failures, cause)
		}
		if err := r.backoff(ctx); err != nil {
			return err
		}
		r.failures++
		s, err := r.openAt(ctx, from)
		if err == nil {
			return r.swap(s, from)
		}
		if r.ctx.Err() != nil {
			return ErrClosed
		}
		if !retryableResume(err) {
			return err
		}
		cause = err
	}
}

// backoff waits before every attempt but the first since the stream last
// made progress.
func (r *resumable[T, S]) backoff(ctx context.Context) error {
	if r.failures == 0 {
		return nil
	}
	d := r.cc.resumeBase << min(r.failures-1, 16)
	d = min(d, r.cc.resumeMax)
	t := time.NewTimer(d)
	defer t.Stop()
	var moved <-chan struct{}
	if r.cc.owners != nil {
		moved = r.cc.owners.movedC()
	}
	select {
	case <-t.C:
		return nil
	case <-moved:
		return nil
	case <-ctx.Done():
		if r.ctx.Err() != nil {
			return ErrClosed
		}
		return ctx.Err()
	}
}

// openAt opens the stream on a live connection, dropping a connection that
// turns out to be dead.
func (r *resumable[T, S]) openAt(ctx context.Context, from uint64) (S, error) {
	if r.via != nil {
		return r.via(ctx, func(c *Client) (S, error) { return r.open(ctx, c, from) })
	}
	c, err := r.cc.client(ctx)
	if err != nil {
		var zero S
		return zero, err
	}
	s, err := r.open(ctx, c, from)
	if err != nil && errors.Is(err, ErrConnectionLost) {
		r.cc.invalidate(c)
	}
	return s, err
}

// swap makes s current and closes the one that ended.
func (r *resumable[T, S]) swap(s S, from uint64) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = s.Close()
		return ErrClosed
	}
	old := r.cur
	r.cur = s
	r.mu.Unlock()
	_ = old.Close()
	r.resumed(from)
	r.resumes.Add(1)
	r.metric.Inc()
	if r.notify != nil {
		r.notify(from, r.endedBy())
	}
	return nil
}

// joinClose returns ctx that also ends when the stream is closed.
func (r *resumable[T, S]) joinClose(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// retryableResume reports whether a failed resubscribe may work later:
// the connection was lost, or the broker's refusal carries a retry class
// that says nothing was applied and another attempt may work (a shard
// moving, a broker still learning about the stream). The decision follows
// the class the broker sent, never the code, so an explicit class wins
// over the code's default and an unknown code is judged by its class.
func retryableResume(err error) bool {
	if errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrSubscriptionLost) {
		return true
	}
	var be *BrokerError
	return errors.As(err, &be) && be.Retry.Retryable()
}

// close ends the stream; next returns ErrClosed afterwards.
func (r *resumable[T, S]) close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	cur := r.cur
	var zero S
	r.cur = zero
	r.mu.Unlock()
	r.cancel()
	return cur.Close()
}

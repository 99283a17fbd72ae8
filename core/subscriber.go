package core

import (
	"context"
	"sync/atomic"
)

// lastSubscriberID numbers subscribers and cache watches alike: both
// name an event stream on the same connections, so their ids must not
// collide.
var lastSubscriberID atomic.Uint64

// Subscriber is one registration on one shard: a bounded queue of
// envelopes that the shard's publishers fill and one consumer drains.
// Next/TryNext are meant for a single consumer goroutine; every other
// method is safe from any goroutine.
type Subscriber struct {
	id    uint64
	shard *Shard
	q     *queue
	// startOffset is the offset of the first record queued for this
	// subscriber; liveOffset was the shard's next offset at registration.
	// Invariant: startOffset <= liveOffset.
	startOffset uint64
	liveOffset  uint64
	capacity    int
	dropped     atomic.Uint64
	// replayFrom and replayTo are the offsets a durable subscriber reads
	// from the log before its queue (equal when there is nothing to read).
	replayFrom, replayTo uint64
	// endOnLag ends the subscriber with *LaggedError at its first drop.
	endOnLag bool
	// registered says s is in its shard's registry and has not left;
	// guarded by the shard's subsMu.
	registered bool
}

func newSubscriber(sh *Shard, capacity int, maxBytes int64, notify func()) *Subscriber {
	return &Subscriber{
		id:       lastSubscriberID.Add(1),
		shard:    sh,
		q:        newQueue(capacity, maxBytes, notify),
		capacity: capacity,
	}
}

// ID returns the process-unique subscriber id assigned by core.
func (s *Subscriber) ID() uint64 { return s.id }

// Shard returns the shard the subscriber reads.
func (s *Subscriber) Shard() *Shard { return s.shard }

// Capacity returns the item bound granted to the subscriber's queue (not
// counting a replay backlog queued ahead of it).
func (s *Subscriber) Capacity() int { return s.capacity }

// StartOffset returns the offset of the first record queued for the
// subscriber: the start of its replay backlog, or LiveOffset without one.
func (s *Subscriber) StartOffset() uint64 { return s.startOffset }

// LiveOffset returns the shard's next offset when the subscriber was
// registered: records below it came from the replay ring, records from it
// on are live.
func (s *Subscriber) LiveOffset() uint64 { return s.liveOffset }

// Next returns the next envelope, waiting until one is queued, the
// subscriber ends or ctx is done. After a stream deletion the envelopes
// still queued are returned first, then ErrStreamDeleted; after Close it
// returns ErrSubscriberClosed.
func (s *Subscriber) Next(ctx context.Context) (*Envelope, error) {
	for {
		e, err := s.q.popOrErr()
		if e != nil || err != nil {
			return e, err
		}
		select {
		case <-s.q.readyC:
		case <-s.q.doneC:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryNext returns the next queued envelope without waiting.
func (s *Subscriber) TryNext() (*Envelope, bool) { return s.q.pop() }

// Ready is signalled (one buffered token) whenever envelopes may be
// available; a consumer that selects on it must then drain with TryNext.
func (s *Subscriber) Ready() <-chan struct{} { return s.q.readyC }

// Done is closed when the subscriber ends (its stream was deleted, it was
// closed, or the broker closed).
func (s *Subscriber) Done() <-chan struct{} { return s.q.doneC }

// Err returns why the subscriber ended, or nil while it is live.
func (s *Subscriber) Err() error { return s.q.endErr() }

// Dropped returns how many batches were dropped for this subscriber
// because its queue was full.
func (s *Subscriber) Dropped() uint64 { return s.dropped.Load() }

// Depth returns the queued envelopes and their payload bytes.
func (s *Subscriber) Depth() (items int, bytes int64) { return s.q.depth() }

// Close unregisters the subscriber and releases its queue; publishers
// waiting for room in it are released. Close is idempotent.
func (s *Subscriber) Close() {
	s.q.end(ErrSubscriberClosed, true)
	s.shard.unregister(s)
}

// endBy ends the subscriber on the broker's behalf (stream deleted or
// broker closed), keeping what is queued readable unless discard is set.
func (s *Subscriber) endBy(err error, discard bool) {
	if s.q.end(err, discard) {
		s.shard.metrics().subscribeDropped.Inc()
	}
}

func (s *Subscriber) countDrop(p QueuePolicy) {
	s.dropped.Add(1)
	s.shard.metrics().countDrop(p)
}

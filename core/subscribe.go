package core

import (
	"context"

	"github.com/felixmq/felix/wire"
)

// SubscribeOptions says where a subscription starts and how deep its
// queue is.
type SubscribeOptions struct {
	// Start is latest (the zero value), earliest (the oldest batch the
	// replay ring holds) or an offset.
	Start wire.StartPosition
	// Capacity is the queue's item bound; 0 means Config.SubQueueCapacity.
	// It is clamped to MaxSubQueueCapacity.
	Capacity int
	// EndOnLag ends a subscriber of a durable stream at its first dropped
	// batch with *LaggedError, instead of dropping on silently.
	EndOnLag bool
	// Notify, when set, is called whenever an envelope is queued for the
	// subscriber or it ends, from the goroutine that did so (a publisher,
	// possibly holding core locks): it must return quickly and must not
	// call back into the subscriber. It lets a consumer run only while
	// there is work instead of parking a goroutine in Next.
	Notify func()
}

// Subscribe registers a subscriber; see SubscribeContext.
func (sh *Shard) Subscribe(opts SubscribeOptions) (*Subscriber, error) {
	return sh.SubscribeContext(context.Background(), opts)
}

// SubscribeContext registers a subscriber, waiting for the commit turn
// until ctx is done. The replay backlog the start position asks for is
// taken and the subscriber registered under one commit turn, so the
// subscriber sees every record from its StartOffset on exactly once:
// the backlog first, then live batches.
//
// StartEarliest queues everything the ring retains. StartOffset n queues
// the ring from n (cutting the batch that holds n); n older than the ring
// is refused with invalid_request, detail reason "too_old" and "earliest";
// n past the next offset with reason "in_future" and "next". StartLatest
// queues nothing from the ring. A backlog longer than the queue's bounds
// is queued whole, above them.
func (sh *Shard) SubscribeContext(ctx context.Context, opts SubscribeOptions) (*Subscriber, error) {
	if sh.Durable() {
		return sh.subscribeDurable(ctx, opts)
	}
	if err := sh.acquireTurn(ctx); err != nil {
		return nil, err
	}
	defer sh.releaseTurn()
	backlog, err := sh.backlogFor(opts.Start)
	if err != nil {
		return nil, err
	}
	s := newSubscriber(sh, sh.capacityFor(opts.Capacity), sh.stream.cfg.SubQueueMaxBytes, opts.Notify)
	s.liveOffset = sh.next
	s.startOffset = sh.next
	if len(backlog) > 0 {
		s.startOffset = backlog[0].BaseOffset
		s.q.preload(backlog)
	}
	if !sh.register(s) {
		return nil, sh.errClosed()
	}
	return s, nil
}

func (sh *Shard) capacityFor(asked int) int {
	if asked <= 0 {
		return sh.stream.cfg.SubQueueCapacity
	}
	return min(asked, MaxSubQueueCapacity)
}

// backlogFor returns the ring batches a start position asks for. Caller
// holds the commit turn.
func (sh *Shard) backlogFor(start wire.StartPosition) ([]*Envelope, error) {
	earliest := sh.ring.earliest(sh.next)
	switch start.Kind {
	case wire.StartEarliest:
		return sh.ring.from(earliest), nil
	case wire.StartOffset:
		n := start.Offset
		switch {
		case n > sh.next:
			return nil, wire.NewError(wire.CodeInvalidRequest, "offset %d is past the shard's next offset %d", n, sh.next).
				WithDetail("reason", "in_future").WithDetail("next", sh.next)
		case n < earliest:
			return nil, wire.NewError(wire.CodeInvalidRequest, "offset %d is older than the oldest retained offset %d", n, earliest).
				WithDetail("reason", "too_old").WithDetail("earliest", earliest)
		case n == sh.next:
			return nil, nil
		}
		return sh.ring.from(n), nil
	default:
		return nil, nil
	}
}

// register adds s to the registry and republishes the snapshot; false if
// the shard has closed.
func (sh *Shard) register(s *Subscriber) bool {
	sh.subsMu.Lock()
	defer sh.subsMu.Unlock()
	if sh.closed.Load() {
		return false
	}
	s.registered = true
	sh.subs = append(sh.subs, s)
	sh.live.Add(1)
	sh.publishSnapshotLocked()
	return true
}

// unregister removes s if it is still registered. It is called once s's
// queue has ended, so until a compaction drops s from the registry a
// publisher's push to it is refused at once (queue ended) and counts no
// drop. The registry is compacted when more than half of it has gone,
// which keeps leaving O(1) amortized.
func (sh *Shard) unregister(s *Subscriber) {
	sh.subsMu.Lock()
	defer sh.subsMu.Unlock()
	if !s.registered {
		return
	}
	s.registered = false
	sh.gone++
	sh.live.Add(-1)
	if sh.gone*2 <= len(sh.subs) {
		return
	}
	var kept []*Subscriber
	if n := len(sh.subs) - sh.gone; n > 0 {
		kept = make([]*Subscriber, 0, n)
		for _, x := range sh.subs {
			if x.registered {
				kept = append(kept, x)
			}
		}
	}
	sh.subs, sh.gone = kept, 0
	sh.publishSnapshotLocked()
}

// publishSnapshotLocked publishes subs to publishers. It shares subs's
// array: register only appends past every published prefix, and a
// compaction or close replaces the array rather than changing it.
func (sh *Shard) publishSnapshotLocked() {
	snap := sh.subs[:len(sh.subs):len(sh.subs)]
	sh.snapshot.Store(&snap)
}

// close marks the shard gone and ends every subscriber with err. It does
// not wait for the commit turn, so a publisher blocked on a full queue is
// released rather than waited for.
func (sh *Shard) close(err error, discard bool) {
	sh.subsMu.Lock()
	if !sh.closed.Load() {
		sh.closeCause.Store(&err)
	}
	sh.closed.Store(true)
	subs := sh.subs
	for _, s := range subs {
		s.registered = false
	}
	sh.subs, sh.gone = nil, 0
	sh.live.Store(0)
	sh.publishSnapshotLocked()
	sh.subsMu.Unlock()
	for _, s := range subs {
		s.endBy(err, discard)
	}
	if p := sh.producers.Load(); p != nil {
		p.forget()
	}
	if s := sh.commits.Load(); s != nil {
		s.forget()
	}
}

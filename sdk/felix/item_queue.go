package felix

import "sync"

// itemQueue is the FIFO between an event stream's reader and the caller of
// Next, bounded by a count. Its storage grows with what it holds and is
// let go once it empties after a burst, so an idle subscription or watch
// costs a few words: a channel of the same bound would allocate all of it
// up front (about 100 KB for 1,024 items), which ten thousand watches in
// one process turn into a gigabyte for the collector to scan.
//
// One goroutine pushes (the reader); any number may pop.
type itemQueue[T any] struct {
	max    int
	readyC chan struct{} // signalled when an item may be ready
	roomC  chan struct{} // signalled when a full queue gave up an item

	mu    sync.Mutex
	items []T // the queued items are items[head:]
	head  int
}

// keptCap is the largest storage an empty queue keeps for the next burst.
const keptCap = 64

func newItemQueue[T any](max int) *itemQueue[T] {
	return &itemQueue[T]{max: max, readyC: make(chan struct{}, 1), roomC: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// tryPush queues it unless the queue is full.
func (q *itemQueue[T]) tryPush(it T) bool {
	q.mu.Lock()
	if len(q.items)-q.head >= q.max {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	signal(q.readyC)
	return true
}

// tryPop takes the oldest item, if there is one.
func (q *itemQueue[T]) tryPop() (T, bool) {
	var zero T
	q.mu.Lock()
	n := len(q.items) - q.head
	if n == 0 {
		q.mu.Unlock()
		return zero, false
	}
	it := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items) && cap(q.items) > keptCap:
		q.items, q.head = nil, 0
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head > keptCap && q.head > len(q.items)/2:
		m := copy(q.items, q.items[q.head:])
		clear(q.items[m:])
		q.items, q.head = q.items[:m], 0
	}
	q.mu.Unlock()
	if n == q.max {
		signal(q.roomC)
	}
	if n > 1 { // another caller of Next may be waiting for the rest
		signal(q.readyC)
	}
	return it, true
}

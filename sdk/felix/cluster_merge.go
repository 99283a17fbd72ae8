package felix

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
)

// shardedQueue is how many items (and notices) a merge holds ahead of
// Next; a shard that gets further ahead stops reading, and flow control
// pushes back on its broker.
const shardedQueue = 256

// shardStream is one shard's resuming stream: a ClusterSubscription or a
// ClusterCacheWatch.
type shardStream[T any] interface {
	Next(ctx context.Context) (T, error)
	Resumes() int
	Close() error
	// notifyResumes has notify called on every resume, on the goroutine
	// calling Next; set before the first Next.
	notifyResumes(notify func(from uint64, cause error))
}

// merge reads one resuming stream per shard, each on its own goroutine,
// into one bounded queue that Next drains. A shard that resumes or ends
// for good is reported by a *ShardNotice.
type merge[T any] struct {
	children []shardStream[T] // by shard
	// admit runs on the shard's goroutine for each item: it marks the item
	// with its shard and says the shard's position once it is delivered.
	admit func(shard uint32, it *T) (pos uint64, ok bool)

	out  chan mergedItem[T]
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	pos    map[uint32]uint64 // per shard, after the last item Next returned
	ended  int               // shards whose stream ended for good
	closed bool
}

type mergedItem[T any] struct {
	it    T
	pos   uint64 // the shard's position once it is delivered, when posOK
	posOK bool
	err   error // a *ShardNotice
}

// start starts one goroutine per child; pos holds starting positions.
func (m *merge[T]) start(pos map[uint32]uint64) {
	m.out, m.pos = make(chan mergedItem[T], shardedQueue), pos
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	for shard, s := range m.children {
		m.wg.Add(1)
		go m.pump(ctx, uint32(shard), s)
	}
}

// pump feeds one shard's items and notices to the queue.
func (m *merge[T]) pump(ctx context.Context, shard uint32, s shardStream[T]) {
	defer m.wg.Done()
	s.notifyResumes(func(from uint64, cause error) {
		m.put(ctx, mergedItem[T]{err: resumedNotice(shard, from, cause)})
	})
	for {
		it, err := s.Next(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.put(ctx, mergedItem[T]{err: &ShardNotice{Shard: shard, Kind: ShardLost, Ended: true, Err: err}})
			return
		}
		pos, ok := m.admit(shard, &it)
		if !m.put(ctx, mergedItem[T]{it: it, pos: pos, posOK: ok}) {
			return
		}
	}
}

func (m *merge[T]) put(ctx context.Context, it mergedItem[T]) bool {
	select {
	case m.out <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// next returns the next item or notice; cancel-safe.
func (m *merge[T]) next(ctx context.Context, shardOf func(T) uint32) (T, error) {
	var zero T
	m.mu.Lock()
	closed, allEnded := m.closed, m.ended == len(m.children)
	m.mu.Unlock()
	switch {
	case closed:
		return zero, ErrClosed
	case allEnded && len(m.out) == 0:
		return zero, fmt.Errorf("%w: every shard ended", ErrSubscriptionLost)
	}
	select {
	case x := <-m.out:
		m.mu.Lock()
		defer m.mu.Unlock()
		if n, ok := errors.AsType[*ShardNotice](x.err); ok && n.Ended {
			m.ended++
		}
		if x.err == nil && x.posOK {
			m.pos[shardOf(x.it)] = x.pos
		}
		return x.it, x.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (m *merge[T]) positions() map[uint32]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.pos)
}

func (m *merge[T]) resumes() int {
	n := 0
	for _, s := range m.children {
		n += s.Resumes()
	}
	return n
}

func (m *merge[T]) close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.stop()
	for _, s := range m.children {
		_ = s.Close()
	}
	m.wg.Wait()
	return nil
}

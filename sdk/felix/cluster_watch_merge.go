package felix

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
)

// watchMerge merges one ClusterCacheWatch per shard into one Next: a
// goroutine per shard reads its watch into a bounded queue (a shard that
// gets further ahead stops reading, and flow control pushes back on its
// broker).
type watchMerge struct {
	children []*ClusterCacheWatch // by shard
	out      chan mergedItem
	stop     context.CancelFunc
	wg       sync.WaitGroup

	mu     sync.Mutex
	resume map[uint32]uint64 // per shard, after the last item Next returned
	ended  int               // shards whose watch ended for good
	closed bool
}

type mergedItem struct {
	it     CacheWatchItem
	resume uint64 // the shard's resume offset once it is delivered
	err    error  // a *ShardNotice
}

func newWatchMerge(children []*ClusterCacheWatch) *watchMerge {
	m := &watchMerge{children: children, out: make(chan mergedItem, shardedQueue), resume: map[uint32]uint64{}}
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	for shard, w := range children {
		m.resume[uint32(shard)] = w.ResumeOffset()
		m.wg.Add(1)
		go m.pump(ctx, uint32(shard), w)
	}
	return m
}

// pump feeds one shard's items and notices to the merge.
func (m *watchMerge) pump(ctx context.Context, shard uint32, w *ClusterCacheWatch) {
	defer m.wg.Done()
	resumes := w.Resumes()
	for {
		it, err := w.Next(ctx)
		if ctx.Err() != nil {
			return
		}
		if r := w.Resumes(); r != resumes {
			resumes = r
			if !m.put(ctx, mergedItem{err: &ShardNotice{Shard: shard, From: w.ResumeOffset()}}) {
				return
			}
		}
		if err != nil {
			m.put(ctx, mergedItem{err: &ShardNotice{Shard: shard, Ended: true, Err: err}})
			return
		}
		it.Shard = shard
		if !m.put(ctx, mergedItem{it: it, resume: w.ResumeOffset()}) {
			return
		}
	}
}

func (m *watchMerge) put(ctx context.Context, it mergedItem) bool {
	select {
	case m.out <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

func (m *watchMerge) next(ctx context.Context) (CacheWatchItem, error) {
	m.mu.Lock()
	closed, allEnded := m.closed, m.ended == len(m.children)
	m.mu.Unlock()
	switch {
	case closed:
		return CacheWatchItem{}, ErrClosed
	case allEnded && len(m.out) == 0:
		return CacheWatchItem{}, fmt.Errorf("%w: every shard's watch ended", ErrSubscriptionLost)
	}
	select {
	case x := <-m.out:
		m.mu.Lock()
		defer m.mu.Unlock()
		if n, ok := errors.AsType[*ShardNotice](x.err); ok && n.Ended {
			m.ended++
		}
		if x.err == nil {
			m.resume[x.it.Shard] = x.resume
		}
		return x.it, x.err
	case <-ctx.Done():
		return CacheWatchItem{}, ctx.Err()
	}
}

func (m *watchMerge) positions() map[uint32]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.resume)
}

func (m *watchMerge) resumes() int {
	n := 0
	for _, w := range m.children {
		n += w.Resumes()
	}
	return n
}

func (m *watchMerge) close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.stop()
	for _, w := range m.children {
		_ = w.Close()
	}
	m.wg.Wait()
	return nil
}

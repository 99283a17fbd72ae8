package broker

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/felixmq/felix/roles/broker/sched"
)

// laneTable keeps, per stream shard, the publishes admitted but not yet
// fanned out. The scheduler runs one job per lane at a time; a job only
// links its publish behind the lane's previous one and returns, so a
// publish waiting on a Block-policy subscriber holds its own shard and no
// executor. depth bounds each lane's admitted publishes.
type laneTable struct {
	depth int64
	mu    sync.Mutex
	m     map[sched.LaneKey]*lane
}

type lane struct {
	key  sched.LaneKey
	refs int                 // admitted and not released; guarded by laneTable.mu
	room *semaphore.Weighted // admitted publishes, at most depth
	tail chan struct{}       // closed when the last linked publish finished; guarded by laneTable.mu
}

func newLaneTable(depth int) *laneTable {
	return &laneTable{depth: int64(depth), m: map[sched.LaneKey]*lane{}}
}

// admit takes a place in the lane, waiting for one when wait is set (until
// ctx ends). It reports false when there is no room.
func (t *laneTable) admit(ctx context.Context, key sched.LaneKey, wait bool) (*lane, bool) {
	t.mu.Lock()
	l := t.m[key]
	if l == nil {
		l = &lane{key: key, room: semaphore.NewWeighted(t.depth)}
		t.m[key] = l
	}
	l.refs++
	t.mu.Unlock()
	var ok bool
	if wait {
		ok = l.room.Acquire(ctx, 1) == nil
	} else {
		ok = l.room.TryAcquire(1)
	}
	if !ok {
		t.unref(l)
		return nil, false
	}
	return l, true
}

// busy reports whether key's lane holds an admitted publish not yet
// released.
func (t *laneTable) busy(key sched.LaneKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[key]
	return ok
}

// release gives back the place admit took.
func (t *laneTable) release(l *lane) {
	l.room.Release(1)
	t.unref(l)
}

func (t *laneTable) unref(l *lane) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(t.m, l.key)
	}
}

// link appends a publish to the lane's order: it must wait for prev (nil
// or closed when nothing is ahead) and close done when it has finished.
func (t *laneTable) link(l *lane) (prev <-chan struct{}, done chan struct{}) {
	done = make(chan struct{})
	t.mu.Lock()
	if l.tail != nil {
		prev = l.tail
	}
	l.tail = done
	t.mu.Unlock()
	return prev, done
}

func isClosed(c <-chan struct{}) bool {
	if c == nil {
		return true
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

package core

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// ErrCacheDeleted ends the watches of a cache that was removed.
var ErrCacheDeleted = errors.New("core: cache deleted")

// CacheWatchOptions says what a watch follows and where it starts.
type CacheWatchOptions struct {
	// Key is the watched key, or with Prefix the watched key prefix (an
	// empty prefix watches the whole cache).
	Key    string
	Prefix bool
	// Retained starts with each matching key's current value, then a
	// state item. Exclusive with From.
	Retained bool
	// From resumes at this offset: the first change delivered is the first
	// at or after it.
	From *uint64
	// MaxBytes bounds the watch's queue of changes (0: the broker's
	// default).
	MaxBytes int64
	// Now decides which entries have expired for the retained values
	// (zero: time.Now()).
	Now time.Time
	// Shard, on a prefix watch of a cache of Shards shards (Shards > 1),
	// limits the watch to the keys of that shard (wire.ShardForKey). A
	// key watch reads its key's shard and needs none.
	Shard  *uint32
	Shards uint32
	// Notify, when set, is called whenever Ready is signalled. It runs
	// under the cache's locks, on the writer's goroutine: it must not
	// block or call into the cache.
	Notify func()
}

// CacheWatchInfo describes a started watch.
type CacheWatchInfo struct {
	// Next is the offset the cache's next write takes; a retained start
	// or resnapshot delivers every change from it on after its values.
	Next uint64
	// Resnapshot is set when From was older than the history: the watch
	// starts with current values as a retained start does.
	Resnapshot bool
}

// CacheWatchState ends the values of a retained start or resnapshot:
// Count values were delivered, and every change from Offset on follows.
type CacheWatchState struct{ Offset, Count uint64 }

// CacheWatchItem is one item of a watch, in delivery order: values and
// changes (Change), the end of the values (State), and last the reason the
// watch ended (End: a *LaggedError, ErrCacheDeleted, or
// ErrSubscriberClosed when the broker core closed).
type CacheWatchItem struct {
	Change *CacheChange
	State  *CacheWatchState
	End    error
}

// CacheWatch follows the changes of one key or key prefix of a cache. Its
// owner drains it with Next when Ready signals and ends it with Close.
// Changes are queued by the writers of the cache, never blocking them: a
// watch whose queue passes its byte bound ends lagged.
type CacheWatch struct {
	c        *Cache
	id       uint64
	key      string
	prefix   bool
	maxBytes int64
	notify   func()
	// shard and shards, when shards > 1, limit a prefix watch to the keys
	// of one shard.
	shard, shards uint32

	// signalled is set by every signal and cleared by TakeSignal; readyC
	// is made only when someone asks for Ready, so the broker, which
	// polls signalled, costs the cache's writers no channel send per
	// change.
	signalled atomic.Bool
	readyC    atomic.Pointer[chan struct{}]

	// registered says the watch is in the cache's registry, at index slot
	// of its key's list (or of the prefix list). from is the offset of the
	// first change pushed to it: released changes below it are before its
	// start (a resume's offset, or what a retained start's values hold).
	// All three are guarded by the cache's logMu.
	registered bool
	slot       int
	from       uint64

	mu sync.Mutex
	// initial are the retained values or history changes, delivered
	// before anything else and not counted against maxBytes.
	initial  []*CacheChange
	scanning bool // the retained scan runs: state and queue wait
	// pending is, while the retained scan runs, the last change to each
	// matching key since it started (counted in queued); overflowed says
	// they passed the bound and were let go, so the scan runs again.
	pending    map[string]*CacheChange
	overflowed bool
	state      *CacheWatchState // to deliver after initial
	// holdUntil, when above the cache's released offset, holds back a
	// retained start's values and state: they were read from applied
	// writes, which a crash could still take back until released passes
	// the state's offset. Nothing is queued meanwhile (every change
	// queued is past the state's offset, so below released).
	holdUntil uint64
	queue     []*CacheChange // live changes; the live part is queue[qhead:]
	qhead     int
	queued    int64 // bytes in queue[qhead:]. Invariant: queued <= maxBytes unless one change
	end       error // why the watch ended, delivered after the queue
	endSent   bool
	closed    bool
}

// Watch starts a watch. A From past the cache's next offset is refused
// with invalid_request, detail reason "in_future"; one older than the
// history (on a durable cache: older than what its log retains, or too
// far back to replay within the watch's bound) starts as a resnapshot. A removed cache refuses with not_found.
func (c *Cache) Watch(opts CacheWatchOptions) (*CacheWatch, CacheWatchInfo, error) {
	l := &c.log
	w := &CacheWatch{c: c, id: lastSubscriberID.Add(1), key: opts.Key, prefix: opts.Prefix, maxBytes: opts.MaxBytes, notify: opts.Notify}
	if w.maxBytes <= 0 {
		w.maxBytes = l.env.maxBytes
	}
	if opts.Prefix && opts.Shard != nil && opts.Shards > 1 {
		if *opts.Shard >= opts.Shards {
			return nil, CacheWatchInfo{}, wire.CheckShard("cache", c.key.Cache, *opts.Shard, opts.Shards)
		}
		w.shard, w.shards = *opts.Shard, opts.Shards
	}
	l.logMu.Lock()
	if l.ended != nil {
		l.logMu.Unlock()
		return nil, CacheWatchInfo{}, wire.NewError(wire.CodeNotFound, "cache %s was deleted", c.key.Cache).WithDetail("reason", "cache_deleted")
	}
	if l.failed != nil {
		err := l.failed
		l.logMu.Unlock()
		return nil, CacheWatchInfo{}, err
	}
	if l.history == nil && l.env.historyBytes > 0 {
		l.history = &changeRing{maxBytes: l.env.historyBytes, env: l.env}
	}
	info := CacheWatchInfo{Next: l.next}
	retained := opts.Retained
	w.from = l.next
	if opts.From != nil {
		from := *opts.From
		w.from = from
		switch {
		case from > l.next:
			l.logMu.Unlock()
			return nil, CacheWatchInfo{}, wire.NewError(wire.CodeInvalidRequest, "cache watch from offset %d is past the next offset %d", from, info.Next).
				WithDetail("reason", "in_future").WithDetail("next", info.Next)
		case from >= l.released:
			// Nothing released from there yet: the pending changes from it
			// on reach the watch as they are released.
		case l.history != nil && from >= l.history.oldest(l.released):
			w.initial = l.history.since(from, w)
		default:
			// Older than the history in memory: a durable cache reads it
			// from its log, as far back as the log keeps it.
			initial, ok := c.logHistory(from, w)
			if ok {
				w.initial = initial
			} else {
				retained, info.Resnapshot = true, true
			}
		}
	}
	w.scanning = retained
	l.registerLocked(w)
	l.logMu.Unlock()
	l.env.metrics.cacheWatches.Inc()
	if retained {
		now := opts.Now
		if now.IsZero() {
			now = time.Now()
		}
		info.Next = c.snapshotInto(w, now.UnixNano())
	}
	return w, info, nil
}

// scanTries is how many times a retained start reads the lock shards
// while writes go on before it reads them all with every lock held.
const scanTries = 3

// snapshotInto gives a retained watch (registered, scanning) the current
// value of each matching key at one offset, which it returns, then its
// state item; every change from that offset on is queued after them.
//
// The lock shards are read one at a time while writes go on. Meanwhile
// the watch collects the last change to each matching key (collect), so
// the values at the offset the read ends at are what the shards held,
// overridden by those changes: a key written after its shard was read
// has its latest write, and one written before has what the read saw.
// A read whose collected changes pass the watch's bound starts again;
// after scanTries it holds every lock shard, which no write can pass.
// Expired entries the read comes across are removed as expiries (which
// the watch collects like any write), so no value it delivers had
// already expired at now.
func (c *Cache) snapshotInto(w *CacheWatch, now int64) uint64 {
	l := &c.log
	for try := 1; ; try++ {
		locked := try > scanTries
		if locked {
			for i := range c.shards {
				c.shards[i].mu.Lock()
			}
		}
		if try > 1 {
			w.mu.Lock()
			w.restartCollectLocked()
			w.mu.Unlock()
		}
		vals := map[string]*CacheChange{}
		if w.prefix {
			for i := range c.shards {
				c.scanShard(&c.shards[i], w, now, vals, locked)
				if afterShardScan != nil {
					afterShardScan(try, locked)
				}
			}
		} else {
			c.scanShard(c.shard(w.key), w, now, vals, locked)
		}
		l.logMu.Lock()
		w.mu.Lock()
		if w.overflowed && !locked {
			w.mu.Unlock()
			l.logMu.Unlock()
			continue
		}
		head := l.next
		l.scanners = withoutScanner(l.scanners, w)
		w.from = head
		for k, ch := range w.pending {
			if ch.Op == wire.CacheOpPut {
				vals[k] = retainedValue(k, ch.Offset, ch.Value, ch.ExpiresAt)
			} else {
				delete(vals, k)
			}
		}
		w.restartCollectLocked()
		w.pending, w.scanning = nil, false
		// Values not yet durable are held back (holdUntil), or dropped
		// when the watch already ended.
		if held := head > l.released; !w.closed && (!held || w.end == nil) {
			w.initial = sortedByOffset(vals)
			w.state = &CacheWatchState{Offset: head, Count: uint64(len(vals))}
			if held {
				w.holdUntil = head
				l.held = append(l.held, w)
			}
		}
		w.mu.Unlock()
		l.logMu.Unlock()
		if locked {
			for i := range c.shards {
				c.shards[i].mu.Unlock()
			}
		}
		w.signal()
		return head
	}
}

// afterShardScan, when set (by tests), runs after each lock shard a
// retained prefix start reads.
var afterShardScan func(try int, locked bool)

// scanShard adds the matching live entries of s to vals, removing expired
// ones as expiries. With held the caller holds s's lock.
func (c *Cache) scanShard(s *cacheShard, w *CacheWatch, now int64, vals map[string]*CacheChange, held bool) {
	if !held {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	add := func(k string, e cacheEntry) {
		if e.expired(now) {
			c.removeLocked(s, k, e, wire.CacheOpExpire)
			return
		}
		vals[k] = retainedValue(k, e.offset, e.value, e.expiresAt)
	}
	if !w.prefix {
		if e, ok := s.m[w.key]; ok {
			add(w.key, e)
		}
		return
	}
	for k, e := range s.m {
		if w.matches(k) {
			add(k, e)
		}
	}
}

func retainedValue(key string, offset uint64, value []byte, expiresAt int64) *CacheChange {
	return &CacheChange{Offset: offset, Op: wire.CacheOpPut, Key: key, Value: value, ExpiresAt: expiresAt, Retained: true}
}

// sortedByOffset returns the values in write order.
func sortedByOffset(vals map[string]*CacheChange) []*CacheChange {
	out := make([]*CacheChange, 0, len(vals))
	for _, v := range vals {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b *CacheChange) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// collect hands a change recorded while the watch's retained scan may
// run to collectLocked (the cache's logMu is held).
func (w *CacheWatch) collect(ch *CacheChange) {
	w.mu.Lock()
	if w.scanning && !w.closed {
		w.collectLocked(ch)
	}
	w.mu.Unlock()
}

// collectLocked keeps ch, a change made while the retained scan runs, as
// the last change to its key (w.mu is held). Past the watch's bound (or
// the broker's) it lets everything collected go and marks the scan
// overflowed, to be run again.
func (w *CacheWatch) collectLocked(ch *CacheChange) {
	if w.overflowed {
		return
	}
	env := w.c.log.env
	if w.pending == nil {
		w.pending = map[string]*CacheChange{}
	}
	if old, ok := w.pending[ch.Key]; ok {
		w.releaseLocked(old.size())
	}
	w.pending[ch.Key] = ch
	size := ch.size()
	w.queued += size
	if total := env.total.Add(size); w.queued > w.maxBytes || total > env.maxTotal {
		w.restartCollectLocked()
		w.overflowed = true
	}
}

// restartCollectLocked drops what collectLocked kept (w.mu is held).
func (w *CacheWatch) restartCollectLocked() {
	w.releaseLocked(w.queued)
	w.pending, w.overflowed = nil, false
}

// ID returns the watch's process-unique id.
func (w *CacheWatch) ID() uint64 { return w.id }

func (w *CacheWatch) matches(key string) bool {
	if w.prefix {
		return strings.HasPrefix(key, w.key) && (w.shards <= 1 || wire.ShardForKey([]byte(key), w.shards) == w.shard)
	}
	return key == w.key
}

// Ready is signalled when an item may be ready or the watch ended; after
// a signal, call Next until it reports nothing. The first call may find a
// signal that nothing follows.
func (w *CacheWatch) Ready() <-chan struct{} {
	if c := w.readyC.Load(); c != nil {
		return *c
	}
	c := make(chan struct{}, 1)
	c <- struct{}{} // a signal may have come before the channel existed
	if !w.readyC.CompareAndSwap(nil, &c) {
		return *w.readyC.Load()
	}
	return c
}

// Signalled reports whether the watch was signalled since the last
// TakeSignal: an item may be ready, or the watch ended.
func (w *CacheWatch) Signalled() bool { return w.signalled.Load() }

// TakeSignal clears the signal; a signal from now on sets it again. Call
// it before draining the watch with Next.
func (w *CacheWatch) TakeSignal() { w.signalled.Store(false) }

func (w *CacheWatch) signal() {
	w.signalled.Store(true)
	if c := w.readyC.Load(); c != nil {
		select {
		case *c <- struct{}{}:
		default:
		}
	}
	if w.notify != nil {
		w.notify()
	}
}

// push queues a released change (the cache's logMu is held). It reports
// false when the watch ended lagged instead, at ch. A change before the
// watch's start is skipped, and so is one released while the retained
// scan runs: the scan collected it when it was recorded.
func (w *CacheWatch) push(ch *CacheChange) bool {
	if ch.Offset < w.from {
		return true
	}
	size := ch.size()
	env := w.c.log.env
	w.mu.Lock()
	if w.closed || w.end != nil || w.scanning {
		w.mu.Unlock()
		return true
	}
	empty := w.qhead == len(w.queue)
	total := env.total.Add(size)
	if !empty && (w.queued+size > w.maxBytes || total > env.maxTotal) {
		env.total.Add(-size)
		w.end = &LaggedError{ResumeFrom: ch.Offset}
		w.mu.Unlock()
		env.metrics.cacheWatchLagged.Inc()
		w.signal()
		return false
	}
	w.queued += size
	w.queue = append(w.queue, ch)
	w.mu.Unlock()
	w.signal() // outside the lock, which the watch's reader takes in Next
	return true
}

// endWith ends the watch with err after what it holds; retained values
// still held back for their writes to be durable are dropped.
func (w *CacheWatch) endWith(err error) {
	w.mu.Lock()
	if w.end == nil {
		w.end = err
	}
	if w.heldLocked() {
		w.initial, w.state, w.holdUntil = nil, nil, 0
	}
	w.mu.Unlock()
	w.signal()
}

// heldLocked reports whether the retained values wait for the cache's
// released offset (w.mu is held).
func (w *CacheWatch) heldLocked() bool {
	return w.holdUntil > w.c.log.releasedA.Load()
}

// holdsPast reports whether the watch's values wait for a released offset
// past mark.
func (w *CacheWatch) holdsPast(mark uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holdUntil > mark
}

// Next returns the next item without blocking, or false when none is
// ready. After an End item, or Close, it always reports false.
func (w *CacheWatch) Next() (CacheWatchItem, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
	case w.heldLocked():
	case len(w.initial) > 0:
		ch := w.initial[0]
		w.initial[0] = nil
		w.initial = w.initial[1:]
		w.metrics().cacheWatchDelivered.Inc()
		return CacheWatchItem{Change: ch}, true
	case w.scanning:
	case w.state != nil:
		s := w.state
		w.state = nil
		return CacheWatchItem{State: s}, true
	case w.qhead < len(w.queue):
		return CacheWatchItem{Change: w.popLocked()}, true
	case w.end != nil && !w.endSent:
		w.endSent = true
		return CacheWatchItem{End: w.end}, true
	}
	return CacheWatchItem{}, false
}

func (w *CacheWatch) popLocked() *CacheChange {
	ch := w.queue[w.qhead]
	w.queue[w.qhead] = nil
	w.qhead++
	w.queue, w.qhead = compactFront(w.queue, w.qhead)
	w.releaseLocked(ch.size())
	w.metrics().cacheWatchDelivered.Inc()
	return ch
}

func (w *CacheWatch) releaseLocked(size int64) {
	w.queued -= size
	w.c.log.env.total.Add(-size)
}

// Close ends the watch and drops what it holds. A second Close does
// nothing.
func (w *CacheWatch) Close() {
	l := &w.c.log
	l.logMu.Lock()
	l.unregisterLocked(w)
	l.logMu.Unlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.releaseLocked(w.queued)
	w.queue, w.qhead, w.initial, w.state = nil, 0, nil, nil
	w.mu.Unlock()
	w.metrics().cacheWatches.Dec()
	w.signal()
}

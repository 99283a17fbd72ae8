package core

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/wire"
)

// CacheChange is one applied write to a cache (or, with Retained, the
// current value of a key sent to a watch that started with values). A
// change is immutable once recorded and shared by the history and every
// watch it is queued for; Value is shared with the cache and read-only.
type CacheChange struct {
	Offset uint64
	Op     wire.CacheChangeOp
	Key    string
	Value  []byte // a put's value; nil otherwise
	// ExpiresAt is a put's expiry in Unix nanoseconds; 0 means never.
	ExpiresAt int64
	Retained  bool

	once     sync.Once
	frame    []byte // set with frameErr by once; exactly one is non-nil
	frameErr error
}

// cacheChangeOverhead is what a change counts in a queue or the history
// beyond its key and value: the change itself and its frame's JSON around
// them, so empty values cannot slip past the bounds.
const cacheChangeOverhead = 200

// size is what a change holds once delivered: the change with its key and
// value, and its encoded frame, which repeats the key and the value in
// base64.
func (ch *CacheChange) size() int64 {
	return int64(2*len(ch.Key)+len(ch.Value)+base64.StdEncoding.EncodedLen(len(ch.Value))) + cacheChangeOverhead
}

// EncodedFrame returns the change's cache_change frame, or why it cannot
// be encoded (an op the protocol does not know): a watch writer must then
// end the watch with that error, never send an empty frame. It is encoded
// on the first call and the same bytes (or error) are returned to every
// caller: do not modify them.
func (ch *CacheChange) EncodedFrame() ([]byte, error) {
	ch.once.Do(func() { ch.frame, ch.frameErr = ch.encode() })
	return ch.frame, ch.frameErr
}

// Frame is EncodedFrame for a change known to encode (every change the
// cache records does); one that cannot is a broken invariant and panics.
func (ch *CacheChange) Frame() []byte {
	b, err := ch.EncodedFrame()
	if err != nil {
		panic(err.Error())
	}
	return b
}

func (ch *CacheChange) encode() ([]byte, error) {
	switch ch.Op {
	case wire.CacheOpPut, wire.CacheOpDelete, wire.CacheOpExpire:
	default:
		return nil, wire.NewError(wire.CodeInternal, "cache change at offset %d of key %q has no known op (%q)", ch.Offset, ch.Key, ch.Op)
	}
	m := &wire.CacheChange{Offset: ch.Offset, Op: ch.Op, Key: ch.Key, Retained: ch.Retained}
	if ch.Op == wire.CacheOpPut {
		m.Value = present(ch.Value)
		if ch.ExpiresAt != 0 {
			ms := uint64(ch.ExpiresAt / 1e6)
			m.ExpiresAtMs = &ms
		}
	}
	b, err := wire.AppendMessageFrame(nil, m)
	if err != nil {
		return nil, wire.NewError(wire.CodeInternal, "encode the cache change at offset %d: %v", ch.Offset, err)
	}
	return b, nil
}

// present makes a put's value non-nil, so it is sent as "" and not null.
func present(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// changeRing is the recent history of one cache: the changes with offsets
// [oldest, next) in order, bounded by bytes. Guarded by the cache's logMu.
// Invariant: the ring holds every change from oldest on, since every
// change of the cache is pushed once the ring exists; their offsets are
// consecutive but for those a log-backed cache's compaction copies took.
type changeRing struct {
	items    []*CacheChange // live part is items[head:]
	head     int
	bytes    int64
	maxBytes int64
	env      *watchEnv // the broker-wide total of every ring's bytes
}

// push appends ch, then drops the oldest changes while the ring passes its
// own bound or every ring together passes the broker's.
func (r *changeRing) push(ch *CacheChange) {
	r.items = append(r.items, ch)
	r.bytes += ch.size()
	total := r.env.historyUsed.Add(ch.size())
	for (r.bytes > r.maxBytes || total > r.env.historyTotal) && r.head < len(r.items) {
		old := r.items[r.head]
		r.items[r.head] = nil
		r.head++
		r.bytes -= old.size()
		total = r.env.historyUsed.Add(-old.size())
	}
	r.items, r.head = compactFront(r.items, r.head)
}

// keptFront is the storage an emptied FIFO keeps for what comes next.
const keptFront = 64

// compactFront tidies a slice FIFO whose live part is items[head:] after
// items left the front: an emptied one restarts (letting a burst's storage
// go), and one whose dead front passed half of it moves the rest down.
func compactFront[T any](items []T, head int) ([]T, int) {
	switch {
	case head == len(items) && cap(items) > keptFront:
		return nil, 0
	case head == len(items):
		return items[:0], 0
	case head > keptFront && head > len(items)/2:
		var zero T
		n := copy(items, items[head:])
		for i := n; i < len(items); i++ {
			items[i] = zero
		}
		return items[:n], 0
	}
	return items, head
}

// oldest returns the first offset held, or next when the ring is empty.
func (r *changeRing) oldest(next uint64) uint64 {
	if r.head == len(r.items) {
		return next
	}
	return r.items[r.head].Offset
}

// since returns the changes at or after from that match w, in order.
func (r *changeRing) since(from uint64, w *CacheWatch) []*CacheChange {
	var out []*CacheChange
	live := r.items[r.head:]
	if len(live) == 0 || from < live[0].Offset {
		return nil
	}
	// Offsets increase, but a log-backed cache's may skip the ones its
	// compaction's copies took: search rather than index.
	i, _ := slices.BinarySearchFunc(live, from, func(ch *CacheChange, off uint64) int { return cmp.Compare(ch.Offset, off) })
	for _, ch := range live[i:] {
		if w.matches(ch.Key) {
			out = append(out, ch)
		}
	}
	return out
}

func (r *changeRing) release() {
	r.env.historyUsed.Add(-r.bytes)
	r.items, r.head, r.bytes = nil, 0, 0
}

// watchEnv is what the caches of one broker share for their watches: the
// configured bounds and the broker-wide total of queued bytes.
type watchEnv struct {
	historyBytes int64 // per cache; <= 0 keeps no history
	historyTotal int64 // over every cache's history
	historyUsed  atomic.Int64
	maxBytes     int64 // per watch queue
	maxTotal     int64 // over every watch queue
	total        atomic.Int64
	metrics      *coreMetrics // the broker's
}

// cacheLog is a cache's change log section: the offset counter, the
// changes not yet released, the history and the watch registry, all
// guarded by logMu. Lock order: a shard mutex, then logMu, then a watch's
// mutex.
//
// A change is recorded when its write is applied and released to the
// history and the watches once it is durable: at once on an in-memory
// cache; on a log-backed one when the log's durable offset passes it
// (after the fsync under FsyncAlways; once written to the OS under
// FsyncPeriodic and FsyncNone, which is all those policies promise an
// acknowledgement too), so no watch sees a change a crash can take back.
type cacheLog struct {
	env   *watchEnv
	logMu sync.Mutex
	// next is the offset the next applied write takes.
	next uint64
	// released is the offset below which every change was released.
	// Invariant: released <= next, and pending holds exactly the changes
	// with offsets in [released, next), in offset order. releasedA
	// mirrors it for readers without logMu (CacheWatch.Next).
	released  uint64
	releasedA atomic.Uint64
	pending   []*CacheChange // the live part is pending[phead:]
	phead     int
	// offBase is what a durable cache adds to its log's offsets (see
	// cache_durable.go); 0 in memory. Set before the cache is shared.
	offBase uint64
	history *changeRing // nil until the first Watch
	keyed   map[string][]*CacheWatch
	prefix  []*CacheWatch
	// scanners are the registered watches whose retained scan runs: they
	// collect changes as they are recorded, since the scan reads values
	// applied but not yet released. held are the retained watches whose
	// values wait for released to reach their state offset.
	scanners []*CacheWatch
	held     []*CacheWatch
	ended    error // the cache was removed; later watches are refused
	failed   error // the cache's log failed; later watches are refused
}

// setReleasedLocked records that every change below off was released.
func (l *cacheLog) setReleasedLocked(off uint64) {
	l.released = off
	l.releasedA.Store(off)
}

// record assigns the next offset to an applied write of op on key (the
// caller holds key's shard lock) and returns it. The change reaches the
// history and the matching watches once it is durable (see cacheLog): at
// once in memory; on a log-backed cache the write is first appended to
// the log, whose offset it takes, and the change is released when the
// log's durable offset passes it (here, or from the log's flusher, or in
// WaitStaged). A write the log refuses takes no offset, reaches no
// watch, and is the error.
func (c *Cache) record(op wire.CacheChangeOp, key string, value []byte, expiresAt int64) (uint64, error) {
	l := &c.log
	l.logMu.Lock()
	defer l.logMu.Unlock()
	if c.store != nil {
		if err := c.appendLocked(op, key, value, expiresAt); err != nil {
			return 0, err
		}
	}
	off := l.next
	l.next++
	var ch *CacheChange
	newChange := func() *CacheChange {
		if ch == nil {
			ch = &CacheChange{Offset: off, Op: op, Key: key, Value: value, ExpiresAt: expiresAt}
		}
		return ch
	}
	for _, w := range l.scanners {
		if w.matches(key) {
			w.collect(newChange())
		}
	}
	if c.store == nil {
		if l.history != nil || len(l.keyed) > 0 || len(l.prefix) > 0 {
			l.deliverLocked(newChange())
		}
		l.setReleasedLocked(l.next)
		return off, nil
	}
	l.pending = append(l.pending, newChange())
	l.releaseLocked(l.offBase + c.store.DurableOffset())
	if l.released <= off {
		c.store.SyncSoon() // released by the flusher, even if no one waits
	}
	return off, nil
}

// appendLocked appends a write to a log-backed cache's log and moves
// next to its offset. A log that failed doing it fails the cache's
// watches.
func (c *Cache) appendLocked(op wire.CacheChangeOp, key string, value []byte, expiresAt int64) error {
	l := &c.log
	var sw CacheStoreWrite
	var err error
	if op == wire.CacheOpPut {
		sw, err = c.store.AppendPut(key, value, expiresAt)
	} else {
		sw, err = c.store.AppendRemove(key, op == wire.CacheOpExpire)
	}
	if err != nil {
		if ferr := c.store.Failure(); ferr != nil {
			l.failLocked(ferr)
		}
		return err
	}
	// The log's offsets are the cache's, but for those compaction's
	// copies took in between, which no write has.
	if l.offBase+sw.Offset < l.next {
		panic(fmt.Sprintf("core: cache %s: the log wrote offset %d (+ base %d), below the cache's next %d", c.key.Cache, sw.Offset, l.offBase, l.next))
	}
	l.next = l.offBase + sw.Offset
	return nil
}

// deliverLocked hands a released change to the history and the matching
// watches.
func (l *cacheLog) deliverLocked(ch *CacheChange) {
	if l.history != nil {
		l.history.push(ch)
	}
	var lagged []*CacheWatch
	for _, w := range l.keyed[ch.Key] {
		if !w.push(ch) {
			lagged = append(lagged, w)
		}
	}
	for _, w := range l.prefix {
		if w.matches(ch.Key) && !w.push(ch) {
			lagged = append(lagged, w)
		}
	}
	for _, w := range lagged {
		l.unregisterLocked(w)
	}
}

// releaseLocked releases, in offset order, the pending changes below
// mark (a cache offset the log says is durable), and lets the held
// retained watches it reaches deliver their values.
func (l *cacheLog) releaseLocked(mark uint64) {
	// Compaction's copies may have taken offsets past the last write.
	mark = min(mark, l.next)
	if mark <= l.released {
		return
	}
	for l.phead < len(l.pending) && l.pending[l.phead].Offset < mark {
		ch := l.pending[l.phead]
		l.pending[l.phead] = nil
		l.phead++
		l.deliverLocked(ch)
	}
	l.pending, l.phead = compactFront(l.pending, l.phead)
	l.setReleasedLocked(mark)
	if len(l.held) == 0 {
		return
	}
	kept := l.held[:0]
	for _, w := range l.held {
		if w.holdsPast(mark) {
			kept = append(kept, w)
		} else {
			w.signal()
		}
	}
	clear(l.held[len(kept):])
	l.held = kept
}

// logDurable is a log-backed cache's hook on its log's flusher: the log
// is durable below durable (a log offset), or failed with err.
func (c *Cache) logDurable(durable uint64, err error) {
	l := &c.log
	l.logMu.Lock()
	defer l.logMu.Unlock()
	if l.ended != nil {
		return
	}
	l.releaseLocked(l.offBase + durable)
	if err != nil {
		l.failLocked(err)
	}
}

// releaseDurable releases what the cache's log holds durable now.
func (c *Cache) releaseDurable() {
	l := &c.log
	mark := l.offBase + c.store.DurableOffset()
	if l.releasedA.Load() >= mark {
		return
	}
	l.logMu.Lock()
	l.releaseLocked(mark)
	l.logMu.Unlock()
}

// failLocked ends every watch of a cache whose log failed with err, drops
// the changes not yet durable (they never will be) and refuses later
// watches: the log must be opened again.
func (l *cacheLog) failLocked(err error) {
	if l.failed != nil || l.ended != nil {
		return
	}
	l.failed = err
	clear(l.pending)
	l.pending, l.phead = nil, 0
	for _, w := range l.endAllLocked() {
		w.endWith(err)
	}
}

// endAllLocked unregisters every watch and returns them, and drops the
// history.
func (l *cacheLog) endAllLocked() []*CacheWatch {
	var ws []*CacheWatch
	for _, list := range l.keyed {
		ws = append(ws, list...)
	}
	ws = append(ws, l.prefix...)
	for _, w := range ws {
		w.registered = false
	}
	l.keyed, l.prefix, l.scanners, l.held = nil, nil, nil, nil
	if l.history != nil {
		l.history.release()
		l.history = nil
	}
	return ws
}

// WaitStaged returns once every write a log-backed cache has applied so
// far is durable under its fsync policy (at once for an in-memory cache),
// or ctx ends. The Staged forms of the cache's operations apply (or read)
// and return without it: a caller that applies many of them in order, as
// the broker does for the requests of one stream, answers each after a
// WaitStaged, and concurrent waits share the log's fsyncs. An answer
// given before it could reflect a write a crash takes back. The plain
// forms are their Staged form and then WaitStaged.
func (c *Cache) WaitStaged(ctx context.Context) error {
	if c.store == nil {
		return nil
	}
	if err := c.store.WaitWritten(ctx); err != nil {
		return err
	}
	c.releaseDurable() // rather than wait for the flusher's hook
	if c.counters == nil {
		return nil
	}
	return c.counters.WaitWritten(ctx)
}

// LogBacked reports whether the cache keeps a log (the broker has durable
// storage), so that its answers must wait for WaitStaged.
func (c *Cache) LogBacked() bool { return c.store != nil }

func (l *cacheLog) registerLocked(w *CacheWatch) {
	w.registered = true
	if w.scanning {
		l.scanners = append(l.scanners, w)
	}
	if w.prefix {
		l.prefix = appendWatch(l.prefix, w)
		return
	}
	if l.keyed == nil {
		l.keyed = map[string][]*CacheWatch{}
	}
	l.keyed[w.key] = appendWatch(l.keyed[w.key], w)
}

func (l *cacheLog) unregisterLocked(w *CacheWatch) {
	if !w.registered {
		return
	}
	w.registered = false
	l.scanners = withoutScanner(l.scanners, w)
	if w.prefix {
		l.prefix = without(l.prefix, w)
		return
	}
	if ws := without(l.keyed[w.key], w); len(ws) > 0 {
		l.keyed[w.key] = ws
	} else {
		delete(l.keyed, w.key)
	}
}

// withoutScanner removes w from the (short) list of scanning watches.
func withoutScanner(ws []*CacheWatch, w *CacheWatch) []*CacheWatch {
	if i := slices.Index(ws, w); i >= 0 {
		return slices.Delete(ws, i, i+1)
	}
	return ws
}

// appendWatch adds w to ws and records where.
func appendWatch(ws []*CacheWatch, w *CacheWatch) []*CacheWatch {
	w.slot = len(ws)
	return append(ws, w)
}

// without removes w from ws in place, moving the last watch into its slot
// (order is not kept), and returns the shorter slice. It costs O(1), so
// closing every watch of a key costs O(watches).
func without(ws []*CacheWatch, w *CacheWatch) []*CacheWatch {
	i, last := w.slot, len(ws)-1
	if i > last || ws[i] != w {
		panic("core: cache watch not at its registry slot")
	}
	ws[i] = ws[last]
	ws[i].slot = i
	ws[last] = nil
	return ws[:last]
}

// close ends every watch of a removed cache with err and refuses later
// ones; the history and the changes not yet released are dropped.
func (c *Cache) close(err error) {
	l := &c.log
	l.logMu.Lock()
	if l.ended != nil {
		l.logMu.Unlock()
		return
	}
	l.ended = err
	clear(l.pending)
	l.pending, l.phead = nil, 0
	ws := l.endAllLocked()
	l.logMu.Unlock()
	for _, w := range ws {
		w.endWith(err)
	}
}

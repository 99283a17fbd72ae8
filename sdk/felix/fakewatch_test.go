package felix

import (
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// Cache watches on the fake broker. The fake answers every cache_watch
// with cache_watch_ok (offset fakeWatchNext, resnapshot when from_offset is
// below fakeWatchHistory), opens the event stream with its hello and hands
// the watch to the test on fakeOpts.watches; the test writes the frames.
// A watch of cache "missing" is refused with not_found.
const (
	fakeWatchNext    = 100 // the offset the next write to any cache takes
	fakeWatchHistory = 50  // the oldest offset the fake can resume from
)

// fakeWatch is one accepted watch on the fake.
type fakeWatch struct {
	id  uint64
	msg *wire.CacheWatch
	es  transport.SendStream
}

func (fb *fakeBroker) cacheWatch(conn transport.Conn, s transport.Stream, m *wire.CacheWatch) bool {
	if m.Cache == "missing" {
		id := m.RequestID
		em := wire.NewError(wire.CodeNotFound, "no such cache").ErrorMessage(true)
		em.RequestID = &id
		_ = writeMsg(s, em)
		return true
	}
	fb.mu.Lock()
	fb.nextSub++
	w := &fakeWatch{id: 5000 + fb.nextSub, msg: m}
	fb.mu.Unlock()
	es, err := conn.OpenUniStreamSync(fb.ctx)
	if err != nil {
		return false
	}
	w.es = es
	if writeMsg(es, &wire.EventStreamHello{SubscriptionID: w.id}) != nil {
		return false
	}
	ok := &wire.CacheWatchOK{RequestID: m.RequestID, WatchID: w.id, Offset: fakeWatchNext,
		Resnapshot: m.FromOffset != nil && *m.FromOffset < fakeWatchHistory}
	if writeMsg(s, ok) != nil {
		return false
	}
	fb.opts.watches <- w
	return true
}

// nextWatch returns the next watch the fake accepted.
func (fb *fakeBroker) nextWatch() *fakeWatch {
	fb.t.Helper()
	select {
	case w := <-fb.opts.watches:
		return w
	case <-time.After(10 * time.Second):
		fb.t.Fatal("fake broker: no cache watch in 10s")
	}
	return nil
}

// send writes frames on the watch's event stream.
func (w *fakeWatch) send(t testing.TB, msgs ...wire.Message) {
	t.Helper()
	for _, m := range msgs {
		if err := writeMsg(w.es, m); err != nil {
			t.Fatalf("fake watch send: %v", err)
		}
	}
}

// put and del build changes.
func put(off uint64, key, value string) *wire.CacheChange {
	return &wire.CacheChange{Offset: off, Op: wire.CacheOpPut, Key: key, Value: []byte(value)}
}

func del(off uint64, key string) *wire.CacheChange {
	return &wire.CacheChange{Offset: off, Op: wire.CacheOpDelete, Key: key}
}

package broker

import (
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/internal/faultfs"
	"github.com/felixmq/felix/wire"
)

// TestALogBackedCacheAnswersAfterTheFsyncWithoutHoldingTheStream: on a
// broker with storage under fsync always, a put on a stream is answered
// only once its record is fsynced, but the stream's later requests are
// applied meanwhile (so the requests in flight on one stream share
// fsyncs): with the first put's fsync hung, a second put is already in the
// cache; once the fsync returns every request is answered, the get with
// the first put's value.
func TestALogBackedCacheAnswersAfterTheFsyncWithoutHoldingTheStream(t *testing.T) {
	fs := faultfs.NewHang()
	cfg := testConfig()
	cfg.Durable.Fsync = "always"
	cfg.Durable.fs = fs
	e := startDurable(t, cfg)
	t.Cleanup(fs.Release)
	s := e.authed(e.dial(0), 0, allFeatures, cacheAll)
	cachePut(s, "warm", "up") // the cache is served and its log open

	c, ok := e.srv.core.Cache(core.CacheKey{Tenant: testTenant, Namespace: "prod", Cache: "sessions"})
	if !ok || !c.LogBacked() {
		t.Fatal("the cache is not log-backed on a broker with storage")
	}
	fs.Start()
	answers := make(chan wire.Message, 8)
	go func() { // t.Fatal belongs to the test's goroutine: read frames here
		defer close(answers)
		for range 3 {
			f, err := s.next()
			if err != nil {
				return
			}
			m, err := wire.ParseMessage(f.Payload)
			if err != nil {
				return
			}
			answers <- m
		}
	}()
	put := func(key string, id uint64) {
		s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Value: []byte("v-" + key), RequestID: id})
	}
	put("first", 10)
	select {
	case <-fs.Blocked(): // the first put's fsync hangs
	case m := <-answers:
		t.Fatalf("answered %#v before any fsync", m)
	}
	put("second", 11)
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "first", RequestID: 12})
	waitFor(t, "the second put to be applied while the first waits for its fsync", func() bool {
		_, ok := c.GetStaged("second", time.Now())
		return ok
	})
	select {
	case m := <-answers:
		t.Fatalf("answered %#v while the first put's fsync hung", m)
	default:
	}
	fs.Release()
	got := map[uint64]wire.Message{}
	for range 3 {
		m, ok := <-answers
		if !ok {
			t.Fatal("the stream ended before every request was answered")
		}
		switch m := m.(type) {
		case *wire.CacheOK:
			got[m.RequestID] = m
		case *wire.CacheValue:
			got[m.RequestID] = m
		default:
			t.Fatalf("answer %#v", m)
		}
	}
	if _, ok := got[10].(*wire.CacheOK); !ok {
		t.Fatalf("first put: %#v", got[10])
	}
	if _, ok := got[11].(*wire.CacheOK); !ok {
		t.Fatalf("second put: %#v", got[11])
	}
	if v, ok := got[12].(*wire.CacheValue); !ok || string(v.Value) != "v-first" {
		t.Fatalf("get: %#v", got[12])
	}
}

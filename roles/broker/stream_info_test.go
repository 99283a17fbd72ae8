package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/felixmq/felix/wire"
)

// streamInfo asks s for stream's information.
func streamInfo(t *testing.T, s *tstream, stream string) *wire.StreamInfoOK {
	t.Helper()
	s.send(&wire.StreamInfo{TenantID: testTenant, Namespace: "prod", Stream: stream, RequestID: 9})
	m := s.recv()
	ans, ok := m.(*wire.StreamInfoOK)
	if !ok || ans.RequestID != 9 {
		t.Fatalf("stream_info answered %#v", m)
	}
	return ans
}

// stream_info on a durable stream: per shard the first and last offsets,
// records and bytes its log holds, subscribers, and what was published
// and delivered.
func TestStreamInfoOfADurableStream(t *testing.T) {
	e := startDurable(t, testConfig())
	qc := e.dial(0)
	s := e.authed(qc, durableFlags, durableFeatures, pubAll)
	empty := streamInfo(t, s, "log")
	if !empty.Durable || len(empty.Shards) != 1 {
		t.Fatalf("empty stream: %+v", empty)
	}
	if sh := empty.Shards[0]; sh.FirstOffset != nil || sh.LastOffset != nil || sh.Records == nil || *sh.Records != 0 || sh.NextOffset != 0 {
		t.Fatalf("empty shard: %+v", sh)
	}

	sub := e.subscribe(qc, s, "log")
	publishAcked(t, s, "log", 0, 5)
	sub.payloads(5)
	// A delivery is counted after its frame is written: the client can
	// read the last one first.
	var got wire.ShardInfoJSON
	waitFor(t, "the fifth delivery counted", func() bool {
		got = streamInfo(t, s, "log").Shards[0]
		return got.DeliveredTotal == 5
	})
	if got.FirstOffset == nil || *got.FirstOffset != 0 || got.LastOffset == nil || *got.LastOffset != 4 {
		t.Fatalf("offsets: %+v", got)
	}
	if got.Records == nil || *got.Records != 5 || got.Bytes == nil || *got.Bytes <= 0 {
		t.Fatalf("log: %+v", got)
	}
	if got.NextOffset != 5 || got.PublishedTotal != 5 || got.Subscribers != 1 || got.DeliveredTotal != 5 {
		t.Fatalf("counters: %+v", got)
	}
}

// stream_info on an in-memory stream has no log figures; an unknown
// stream is not_found; without stream.subscribe it is refused.
func TestStreamInfoOfAnInMemoryStream(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "live", Shards: 3})
	qc := e.dial(0)
	// Acked on commit: an in-memory publish is otherwise acked when it is
	// queued, before the shard has counted it.
	s := e.authed(qc, 0, allFeatures|wire.FeatureAckOnCommit, pubAll)
	s.write(binPublish("live", true, 1, numbered(0), numbered(1)))
	if _, ok := s.recv().(*wire.PublishOK); !ok {
		t.Fatal("publish not acked")
	}
	ans := streamInfo(t, s, "live")
	if ans.Durable || len(ans.Shards) != 3 {
		t.Fatalf("%+v", ans)
	}
	var published uint64
	for i, sh := range ans.Shards {
		if sh.Shard != uint32(i) || sh.Records != nil || sh.Bytes != nil || sh.FirstOffset != nil {
			t.Fatalf("shard %d: %+v", i, sh)
		}
		published += sh.PublishedTotal
	}
	if published != 2 {
		t.Fatalf("published %d, want 2", published)
	}
	s.send(&wire.StreamInfo{TenantID: testTenant, Namespace: "prod", Stream: "ghost", RequestID: 2})
	expectCode(t, s.recv(), wire.CodeNotFound)

	other := e.authed(qc, 0, allFeatures, "stream.publish:stream:acme")
	other.send(&wire.StreamInfo{TenantID: testTenant, Namespace: "prod", Stream: "live", RequestID: 3})
	expectCode(t, other.recv(), wire.CodeForbidden)
}

// cache_keys pages through a prefix in byte order, leaving out other
// keys, until no next cursor is given.
func TestCacheKeysPages(t *testing.T) {
	e := startEnv(t, testConfig())
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, cacheAll)
	var want []string
	for i := range 7 {
		k := fmt.Sprintf("user:%02d", 6-i)
		cachePut(s, k, "v")
		want = append(want, k)
		cachePut(s, fmt.Sprintf("order:%d", i), "v")
	}
	slices.Sort(want)
	var got []string
	after, pages := "", 0
	for {
		s.send(&wire.CacheKeys{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Prefix: "user:", After: after, Limit: 3, RequestID: 4})
		m := s.recv()
		page, ok := m.(*wire.CacheKeysPage)
		if !ok {
			t.Fatalf("cache_keys answered %#v", m)
		}
		pages++
		if len(page.Keys) > 3 {
			t.Fatalf("page of %d keys past the limit 3", len(page.Keys))
		}
		got = append(got, page.Keys...)
		if page.Next == nil {
			break
		}
		after = *page.Next
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Fatalf("got %q in %d pages, want %q in 3", got, pages, want)
	}
	s.send(&wire.CacheKeys{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Limit: wire.MaxCacheKeysLimit + 1, RequestID: 5})
	expectCode(t, s.recv(), wire.CodeInvalidRequest)

	narrow := e.authed(qc, 0, allFeatures, "cache.read:cache:acme/prod/sessions/user:*")
	narrow.send(&wire.CacheKeys{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Prefix: "user:", RequestID: 6})
	if page, ok := narrow.recv().(*wire.CacheKeysPage); !ok || len(page.Keys) != 7 {
		t.Fatalf("a token for user:* could not list user: keys: %#v", page)
	}
	narrow.send(&wire.CacheKeys{TenantID: testTenant, Namespace: "prod", Cache: "sessions", RequestID: 7})
	expectCode(t, narrow.recv(), wire.CodeForbidden)
}

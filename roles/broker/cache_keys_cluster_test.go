package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/felixmq/felix/wire"
)

func TestMergeKeyPagesStopsAtTheSmallestLastKeyOfASourceWithMore(t *testing.T) {
	cases := []struct {
		name  string
		pages []keysPage
		limit int
		want  []string
		more  bool
	}{
		{"one source, all of it", []keysPage{{keys: []string{"a", "b"}}}, 10, []string{"a", "b"}, false},
		{"empty", []keysPage{{}, {}}, 10, []string{}, false},
		// b has more after "c": "d" of the other source may not be the
		// next key ("c2" could be on b), so the page stops at "c".
		{"cut at a source with more", []keysPage{{keys: []string{"a", "c"}, more: true}, {keys: []string{"b", "d"}}}, 2, []string{"a", "b"}, true},
		{"cutoff below the limit", []keysPage{{keys: []string{"a", "c"}, more: true}, {keys: []string{"b", "d", "e"}}}, 10, []string{"a", "b", "c"}, true},
		{"limit below the cutoff", []keysPage{{keys: []string{"a", "b", "c"}}, {keys: []string{"d"}}}, 2, []string{"a", "b"}, true},
		{"a key on two sources once", []keysPage{{keys: []string{"a", "b"}}, {keys: []string{"b"}}}, 10, []string{"a", "b"}, false},
	}
	for _, c := range cases {
		got, more := mergeKeyPages(c.pages, c.limit)
		if !slices.Equal(got, c.want) || more != c.more {
			t.Errorf("%s: %v more=%v, want %v more=%v", c.name, got, more, c.want, c.more)
		}
	}
}

// cache_keys through either broker lists the keys of every shard, pages
// included, each key once: the entry merges its own with the other
// owner's.
func TestCacheKeysListsEveryShardThroughEitherBroker(t *testing.T) {
	a, b := startStandard(t)
	sa := a.authed(a.dial(0), 0, allFeatures, cacheAll)
	var want []string
	for i := range 40 {
		k := fmt.Sprintf("k%02d", i)
		want = append(want, k)
		sa.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: k, Value: []byte("v"), RequestID: uint64(100 + i)})
		if _, ok := sa.recv().(*wire.CacheOK); !ok {
			t.Fatalf("put %s", k)
		}
	}
	for i, e := range []*env{a, b} {
		c, _ := e.srv.resolveCache(testTenant, "prod", "sessions")
		if n, _ := c.Len(); n == 0 || n == int64(len(want)) {
			t.Fatalf("broker %d holds %d of %d keys; the test needs both shards owned apart", i, n, len(want))
		}
	}
	for i, e := range []*env{a, b} {
		s := e.authed(e.dial(0), 0, allFeatures, cacheAll)
		var got []string
		after := ""
		for page := 0; page < 20; page++ {
			s.send(&wire.CacheKeys{TenantID: testTenant, Namespace: "prod", Cache: "sessions", After: after, Limit: 7, RequestID: uint64(page + 1)})
			p, ok := s.recv().(*wire.CacheKeysPage)
			if !ok || len(p.Keys) > 7 {
				t.Fatalf("broker %d page %d: %#v", i, page, p)
			}
			got = append(got, p.Keys...)
			if p.Next == nil {
				break
			}
			after = *p.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("broker %d listed %v, want %v", i, got, want)
		}
	}
	// The owner checks the token again: a token without cache.read over
	// the keys is refused, whichever broker it reaches first.
	ro := b.authed(b.dial(0), 0, allFeatures, "cache.write:cache:acme/prod/sessions/*")
	ro.send(&wire.CacheKeys{TenantID: testTenant, Namespace: "prod", Cache: "sessions", RequestID: 9})
	expectCode(t, ro.recv(), wire.CodeForbidden)
}

package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// Keys pages through a cache as a sort of every live key would: the
// naive model lists, sorts and cuts; expired entries are left out.
func TestCacheKeysAgainstASort(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c"})
	now := time.Now()
	r := rand.New(rand.NewPCG(1, 2))
	var live []string
	for i := range 300 {
		k := fmt.Sprintf("%c:%03d", "abc"[r.IntN(3)], i)
		ttl := time.Duration(0)
		if i%10 == 0 {
			ttl = time.Nanosecond // expired by now+1s
		} else {
			live = append(live, k)
		}
		if err := c.Put(k, []byte("v"), ttl, now); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(live)
	later := now.Add(time.Second)
	for _, prefix := range []string{"", "a:", "b:0", "zz"} {
		for _, limit := range []int{1, 7, 1000} {
			var want, got []string
			for _, k := range live {
				if strings.HasPrefix(k, prefix) {
					want = append(want, k)
				}
			}
			after, pages := "", 0
			for {
				keys, more := c.Keys(prefix, after, limit, later)
				if len(keys) > limit || (more && len(keys) != limit) {
					t.Fatalf("prefix %q limit %d: page of %d, more %v", prefix, limit, len(keys), more)
				}
				got = append(got, keys...)
				pages++
				if !more {
					break
				}
				after = keys[len(keys)-1]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("prefix %q limit %d: got %d keys, want %d", prefix, limit, len(got), len(want))
			}
		}
	}
}

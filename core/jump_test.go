package core

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestJumpHashVectors(t *testing.T) {
	// Published vectors of the reference implementation.
	for _, v := range []struct {
		key     uint64
		buckets int32
		want    int32
	}{
		{1, 1, 0}, {42, 57, 43}, {0xDEAD10CC, 1, 0}, {0xDEAD10CC, 666, 361},
		{256, 1024, 520}, {0, -10, 0}, {0xDEAD10CC, -666, 0},
	} {
		if got := JumpHash(v.key, v.buckets); got != v.want {
			t.Errorf("JumpHash(%#x, %d) = %d, want %d", v.key, v.buckets, got, v.want)
		}
	}
}

// jumpChain is the naive reference: it follows the key's jump sequence
// without a bound, recording every bucket the key would occupy as the
// bucket count grows, up to limit.
func jumpChain(key uint64, limit int64) []int64 {
	chain := []int64{0}
	b := int64(0)
	for {
		key = key*2862933555777941757 + 1
		j := int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
		if j >= limit {
			return chain
		}
		chain = append(chain, j)
		b = j
	}
}

// naiveJump answers by linear scan: the last jump target below buckets.
func naiveJump(chain []int64, buckets int32) int32 {
	best := int64(0)
	for _, c := range chain {
		if c < int64(buckets) {
			best = c
		}
	}
	return int32(best)
}

func TestJumpHashMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const limit = 2000
	for range 300 {
		key := r.Uint64()
		chain := jumpChain(key, limit)
		for n := int32(1); n < limit; n++ {
			if got, want := JumpHash(key, n), naiveJump(chain, n); got != want {
				t.Fatalf("key %#x buckets %d: fast %d naive %d", key, n, got, want)
			}
		}
	}
}

func TestJumpHashMovesOnlyToNewBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const keys = 100_000
	for _, n := range []int32{1, 2, 7, 10, 63, 100} {
		moved := 0
		for range keys {
			k := r.Uint64()
			a, b := JumpHash(k, n), JumpHash(k, n+1)
			if a != b {
				if b != n {
					t.Fatalf("key moved from %d to old bucket %d when growing to %d", a, b, n+1)
				}
				moved++
			}
		}
		want := float64(keys) / float64(n+1)
		if math.Abs(float64(moved)-want) > 0.1*want {
			t.Errorf("growing %d->%d moved %d keys, want about %.0f", n, n+1, moved, want)
		}
	}
}

func TestJumpHashUniform(t *testing.T) {
	const buckets, keys = 16, 160_000
	var counts [buckets]int
	for i := range keys {
		counts[JumpHash(fnv1a64String("key-"+strconv.Itoa(i)), buckets)]++
	}
	// Chi-square with 15 degrees of freedom; 37.7 is the 0.001 quantile.
	exp := float64(keys) / buckets
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - exp
		chi += d * d / exp
	}
	if chi > 37.7 {
		t.Errorf("distribution over %d buckets not uniform: chi2 %.1f counts %v", buckets, chi, counts)
	}
}

func TestFNV1aMatchesStdlib(t *testing.T) {
	for _, s := range []string{"", "a", "user-42", "the quick brown fox"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := fnv1a64([]byte(s)), h.Sum64(); got != want {
			t.Errorf("fnv1a64(%q) = %#x want %#x", s, got, want)
		}
		if got, want := fnv1a64String(s), h.Sum64(); got != want {
			t.Errorf("fnv1a64String(%q) = %#x want %#x", s, got, want)
		}
	}
}

func TestShardForKeyIsJumpHashOfFNV(t *testing.T) {
	_, st := newTestStream(t, Config{}, 12, "")
	for i := range 1000 {
		key := []byte("key-" + strconv.Itoa(i))
		h := fnv.New64a()
		h.Write(key)
		want := uint32(JumpHash(h.Sum64(), 12))
		if got := st.ShardForKey(key); got != want {
			t.Fatalf("ShardForKey(%q) = %d, want %d", key, got, want)
		}
	}
	if got := st.ShardForKey(nil); got != 0 {
		t.Errorf("nil key -> shard %d, want 0", got)
	}
	if _, err := st.Shard(12); err == nil {
		t.Error("shard 12 of 12 accepted")
	}
}

package wire

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestJumpHashVectors(t *testing.T) {
	// Published vectors of the reference implementation, and no buckets.
	for _, v := range []struct {
		key     uint64
		buckets uint32
		want    uint32
	}{
		{1, 1, 0}, {42, 57, 43}, {0xDEAD10CC, 1, 0}, {0xDEAD10CC, 666, 361},
		{256, 1024, 520}, {0, 0, 0}, {0xDEAD10CC, 0, 0},
	} {
		if got := jumpHash(v.key, v.buckets); got != v.want {
			t.Errorf("jumpHash(%#x, %d) = %d, want %d", v.key, v.buckets, got, v.want)
		}
	}
}

// shardGolden are shards computed by the code brokers ran before
// ShardForKey moved here (core.JumpHash over core's FNV-1a-64): a change
// that moves any of these keys moves data between shards of existing
// streams. The spec gives no vectors of its own.
var shardGolden = []struct {
	key    string
	shards uint32
	want   uint32
}{
	{"", 0, 0}, {"", 1, 0}, {"", 12, 0}, {"", 65536, 0},
	{"a", 0, 0}, {"a", 1, 0},
	{"a", 2, 1},
	{"a", 3, 2},
	{"a", 12, 2},
	{"a", 100, 31},
	{"a", 1024, 163},
	{"a", 65536, 29077},
	{"user-42", 2, 0},
	{"user-42", 3, 0},
	{"user-42", 12, 9},
	{"user-42", 100, 79},
	{"user-42", 1024, 364},
	{"user-42", 65536, 58850},
	{"orders/2026-12-01/17", 2, 1},
	{"orders/2026-12-01/17", 3, 2},
	{"orders/2026-12-01/17", 12, 5},
	{"orders/2026-12-01/17", 100, 38},
	{"orders/2026-12-01/17", 1024, 122},
	{"orders/2026-12-01/17", 65536, 38428},
	{"the quick brown fox", 2, 1},
	{"the quick brown fox", 3, 1},
	{"the quick brown fox", 12, 1},
	{"the quick brown fox", 100, 1},
	{"the quick brown fox", 1024, 383},
	{"the quick brown fox", 65536, 33821},
	{"\x00", 2, 0},
	{"\x00", 3, 2},
	{"\x00", 12, 4},
	{"\x00", 100, 76},
	{"\x00", 1024, 762},
	{"\x00", 65536, 18685},
	{"\xff\xfe\x00\x01", 2, 0},
	{"\xff\xfe\x00\x01", 3, 0},
	{"\xff\xfe\x00\x01", 12, 0},
	{"\xff\xfe\x00\x01", 100, 62},
	{"\xff\xfe\x00\x01", 1024, 796},
	{"\xff\xfe\x00\x01", 65536, 21272},
	{"key-0", 2, 1},
	{"key-0", 3, 1},
	{"key-0", 12, 1},
	{"key-0", 100, 86},
	{"key-0", 1024, 565},
	{"key-0", 65536, 13105},
	{"key-999", 2, 0},
	{"key-999", 3, 2},
	{"key-999", 12, 5},
	{"key-999", 100, 13},
	{"key-999", 1024, 568},
	{"key-999", 65536, 65105},
	{"tenant:acme|ns:prod|id:123456789", 2, 1},
	{"tenant:acme|ns:prod|id:123456789", 3, 2},
	{"tenant:acme|ns:prod|id:123456789", 12, 7},
	{"tenant:acme|ns:prod|id:123456789", 100, 97},
	{"tenant:acme|ns:prod|id:123456789", 1024, 905},
	{"tenant:acme|ns:prod|id:123456789", 65536, 13845},
}

func TestShardForKeyGolden(t *testing.T) {
	for _, g := range shardGolden {
		if got := ShardForKey([]byte(g.key), g.shards); got != g.want {
			t.Errorf("ShardForKey(%q, %d) = %d, want %d", g.key, g.shards, got, g.want)
		}
	}
	if got := ShardForKey(nil, 12); got != 0 {
		t.Errorf("nil key -> shard %d, want 0", got)
	}
}

// TestShardForKeyMatchesNaive checks the fast path (KeyHash written out,
// jumpHash bounded by the shard count) against the standard library's
// FNV-1a and the unbounded jump chain scanned linearly.
func TestShardForKeyMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const limit = 300
	for i := range 500 {
		key := make([]byte, 1+r.IntN(40))
		for j := range key {
			key[j] = byte(r.Uint32())
		}
		if i%2 == 0 {
			key = []byte("key-" + strconv.Itoa(i))
		}
		h := fnv.New64a()
		h.Write(key)
		chain := jumpChain(h.Sum64(), limit)
		for n := uint32(1); n < limit; n++ {
			if got, want := ShardForKey(key, n), uint32(naiveJump(chain, int32(n))); got != want {
				t.Fatalf("key %q shards %d: fast %d naive %d", key, n, got, want)
			}
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
		for n := uint32(1); n < limit; n++ {
			if got, want := jumpHash(key, n), uint32(naiveJump(chain, int32(n))); got != want {
				t.Fatalf("key %#x buckets %d: fast %d naive %d", key, n, got, want)
			}
		}
	}
}

func TestJumpHashMovesOnlyToNewBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const keys = 100_000
	for _, n := range []uint32{1, 2, 7, 10, 63, 100} {
		moved := 0
		for range keys {
			k := r.Uint64()
			a, b := jumpHash(k, n), jumpHash(k, n+1)
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
		counts[jumpHash(KeyHash("key-"+strconv.Itoa(i)), buckets)]++
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
		if got, want := KeyHash([]byte(s)), h.Sum64(); got != want {
			t.Errorf("KeyHash([]byte(%q)) = %#x want %#x", s, got, want)
		}
		if got, want := KeyHash(s), h.Sum64(); got != want {
			t.Errorf("KeyHash(%q) = %#x want %#x", s, got, want)
		}
	}
}

package wire

// ShardForKey returns the shard of a stream with shards shards that a
// record with routing key key goes to: the jump consistent hash of the
// key's FNV-1a-64 (KeyHash) over the shard count. An empty key, and a
// stream of at most one shard, map to shard 0. Brokers and clients that
// route keys themselves call this one function, so they always agree.
func ShardForKey(key []byte, shards uint32) uint32 {
	if len(key) == 0 {
		return 0
	}
	return jumpHash(KeyHash(key), shards)
}

// KeyHash is FNV-1a over key with the 64-bit parameters, written out so
// the keyed publish path does not allocate a hash.Hash64. It takes a
// string or a byte slice, so callers holding either need no conversion.
func KeyHash[K ~string | ~[]byte](key K) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime
	}
	return h
}

// jumpHash maps key to a bucket in [0, buckets) with the jump consistent
// hash of Lamping and Veach: growing the bucket count from n to n+1 moves
// only the keys that land in the new bucket (about 1/(n+1) of them).
// buckets <= 1 yields 0. The arithmetic is the reference implementation's,
// in 64 bits, so every uint32 bucket count is exact.
func jumpHash(key uint64, buckets uint32) uint32 {
	if buckets <= 1 {
		return 0
	}
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return uint32(b)
}

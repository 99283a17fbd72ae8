package core

// fnv1a64 is FNV-1a over b with the 64-bit parameters, written out so the
// keyed publish path does not allocate a hash.Hash64.
func fnv1a64(b []byte) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}

func fnv1a64String(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// JumpHash maps key to a bucket in [0, buckets) with the jump consistent
// hash of Lamping and Veach: growing the bucket count from n to n+1 moves
// only the keys that land in the new bucket (about 1/(n+1) of them).
// buckets <= 1 yields 0.
func JumpHash(key uint64, buckets int32) int32 {
	if buckets <= 1 {
		return 0
	}
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int32(b)
}

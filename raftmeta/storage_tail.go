package raftmeta

import (
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Bounds of the newest entries a Storage keeps in memory.
const (
	maxTailEntries = 4096
	maxTailBytes   = 4 << 20
)

// logTail is the newest stored entries, kept in memory so that raft's
// reads of the entries it has just written (the term of the entry before
// an append, the entries it commits, what it sends a follower that is
// keeping up) cost no bbolt transaction and no decoding. It always ends at
// the storage's last index; it is a cache, so it may hold fewer entries
// than the log, or none. Entries are shared with raft, which never
// modifies them.
type logTail struct {
	ents  []*pb.Entry // consecutive indexes
	sizes []int       // proto.Size of each entry
	bytes int
}

func (t *logTail) first() uint64 { return t.ents[0].GetIndex() }

// covers reports whether every index in [lo, hi) is in the tail.
func (t *logTail) covers(lo, hi uint64) bool {
	return len(t.ents) > 0 && lo >= t.first() && hi <= t.first()+uint64(len(t.ents)) && lo < hi
}

// term returns the term of the entry at i, if the tail holds it.
func (t *logTail) term(i uint64) (uint64, bool) {
	if !t.covers(i, i+1) {
		return 0, false
	}
	return t.ents[i-t.first()].GetTerm(), true
}

// slice returns the entries in [lo, hi) as Storage.Entries does: at least
// one, then as many as fit in maxSize bytes. The tail must cover [lo, hi).
func (t *logTail) slice(lo, hi, maxSize uint64) []*pb.Entry {
	from, to := int(lo-t.first()), int(hi-t.first())
	var size uint64
	end := from
	for end < to {
		size += uint64(t.sizes[end])
		if end > from && size > maxSize {
			break
		}
		end++
	}
	return append([]*pb.Entry(nil), t.ents[from:end]...)
}

// append records ents, just written after the stored log was truncated
// to ents[0]'s index. A gap (the tail was emptied) starts a new tail.
func (t *logTail) append(ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	first := ents[0].GetIndex()
	switch {
	case len(t.ents) == 0:
	case first <= t.first():
		t.reset()
	case first <= t.first()+uint64(len(t.ents)):
		t.dropFrom(int(first - t.first()))
	default:
		t.reset()
	}
	for _, e := range ents {
		n := proto.Size(e)
		t.ents = append(t.ents, e)
		t.sizes = append(t.sizes, n)
		t.bytes += n
	}
	t.trim()
}

// compact forgets the entries at or below i.
func (t *logTail) compact(i uint64) {
	if len(t.ents) == 0 || i < t.first() {
		return
	}
	if i >= t.first()+uint64(len(t.ents))-1 {
		t.reset()
		return
	}
	t.dropBefore(int(i - t.first() + 1))
}

func (t *logTail) reset() {
	t.ents, t.sizes, t.bytes = nil, nil, 0
}

// dropFrom removes the entries from position k on.
func (t *logTail) dropFrom(k int) {
	for _, n := range t.sizes[k:] {
		t.bytes -= n
	}
	clear(t.ents[k:])
	t.ents, t.sizes = t.ents[:k], t.sizes[:k]
}

// trim drops the oldest entries beyond the bounds, keeping at least one.
func (t *logTail) trim() {
	k, bytes := 0, t.bytes
	for k < len(t.ents)-1 && (len(t.ents)-k > maxTailEntries || bytes > maxTailBytes) {
		bytes -= t.sizes[k]
		k++
	}
	t.dropBefore(k)
}

// dropBefore removes the first k entries. The arrays keep their dropped
// prefix until append next reallocates them (which copies only the rest);
// the dropped slots are cleared so their entries can be collected.
func (t *logTail) dropBefore(k int) {
	for _, n := range t.sizes[:k] {
		t.bytes -= n
	}
	clear(t.ents[:k])
	t.ents, t.sizes = t.ents[k:], t.sizes[k:]
}

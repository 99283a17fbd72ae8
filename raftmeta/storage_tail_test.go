package raftmeta

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// logModel is what a Storage's log must hold: entries after offset.
type logModel struct {
	offset, offsetTerm uint64
	terms              []uint64 // terms[k] is the term of index offset+1+k
	snap               uint64
}

func (m *logModel) last() uint64 { return m.offset + uint64(len(m.terms)) }

// TestStorageTailMatchesTheLog drives a Storage through random appends
// (with truncated suffixes), compactions and snapshots, well past the
// in-memory tail's bounds, and checks after each step that Term and
// Entries answer as the stored log does: the tail is only a cache.
func TestStorageTailMatchesTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openTestStorage(t, path)
	defer func() { s.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))
	var m logModel
	term := uint64(1)
	for step := range 300 {
		switch op := rng.IntN(20); {
		case op < 15 || len(m.terms) == 0: // append, sometimes over a suffix
			from := m.last() + 1
			if len(m.terms) > 0 && rng.IntN(4) == 0 {
				from = m.offset + 1 + uint64(rng.IntN(len(m.terms)))
				term++
			}
			n := 1 + rng.IntN(400)
			ents := make([]*pb.Entry, n)
			for k := range ents {
				ents[k] = &pb.Entry{Index: new(from + uint64(k)), Term: new(term), Type: pb.EntryNormal.Enum(), Data: make([]byte, rng.IntN(2000))}
			}
			if err := s.Save(nil, ents, nil); err != nil {
				t.Fatal(err)
			}
			m.terms = m.terms[:from-m.offset-1]
			for range n {
				m.terms = append(m.terms, term)
			}
		case op < 18: // compact part of the log
			i := m.offset + 1 + uint64(rng.IntN(len(m.terms)))
			if err := s.Compact(i); err != nil {
				t.Fatal(err)
			}
			m.offsetTerm = m.terms[i-m.offset-1]
			m.terms = m.terms[i-m.offset:]
			m.offset = i
		case op < 19: // a snapshot from the leader replaces the log
			i := m.last() + uint64(rng.IntN(50))
			term++
			snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(i), Term: new(term), ConfState: &pb.ConfState{Voters: []uint64{1}}}, Data: []byte("s")}
			if err := s.Save(nil, nil, snap); err != nil {
				t.Fatal(err)
			}
			m = logModel{offset: i, offsetTerm: term, snap: i}
		default: // reopen: the tail starts empty
			s.Close()
			s = openTestStorage(t, path)
		}
		checkAgainstModel(t, step, s, &m, rng)
	}
}

func checkAgainstModel(t *testing.T, step int, s *Storage, m *logModel, rng *rand.Rand) {
	t.Helper()
	if last, _ := s.LastIndex(); last != m.last() {
		t.Fatalf("step %d: last %d, want %d", step, last, m.last())
	}
	for i := m.offset; i <= m.last()+1; i++ {
		got, err := s.Term(i)
		switch {
		case i == m.offset:
			if err != nil || got != m.offsetTerm {
				t.Fatalf("step %d: Term(%d) = %d, %v; want %d", step, i, got, err, m.offsetTerm)
			}
		case i > m.last():
			if !errors.Is(err, raft.ErrUnavailable) {
				t.Fatalf("step %d: Term(%d) past the end: %v", step, i, err)
			}
		default:
			if err != nil || got != m.terms[i-m.offset-1] {
				t.Fatalf("step %d: Term(%d) = %d, %v; want %d", step, i, got, err, m.terms[i-m.offset-1])
			}
		}
	}
	if m.offset > 0 {
		if _, err := s.Term(m.offset - 1); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("step %d: Term below the offset: %v", step, err)
		}
	}
	for range 20 {
		if len(m.terms) == 0 {
			return
		}
		lo := m.offset + 1 + uint64(rng.IntN(len(m.terms)))
		hi := lo + 1 + uint64(rng.IntN(int(m.last()-lo+1)))
		maxSize := uint64(rng.IntN(64 << 10))
		got, err := s.Entries(lo, hi, maxSize)
		if err != nil {
			t.Fatalf("step %d: Entries(%d, %d): %v", step, lo, hi, err)
		}
		var size uint64
		want := 0
		for i := lo; i < hi; i++ {
			e, _ := s.entryFromDisk(i)
			size += uint64(proto.Size(e))
			if want > 0 && size > maxSize {
				break
			}
			want++
		}
		if len(got) != want {
			t.Fatalf("step %d: Entries(%d, %d, %d) gave %d entries, want %d", step, lo, hi, maxSize, len(got), want)
		}
		for k, e := range got {
			disk, err := s.entryFromDisk(e.GetIndex())
			if err != nil || !proto.Equal(e, disk) {
				t.Fatalf("step %d: entry %d differs from the file (%v)", step, e.GetIndex(), err)
			}
			if e.GetIndex() != lo+uint64(k) || e.GetTerm() != m.terms[lo+uint64(k)-m.offset-1] {
				t.Fatalf("step %d: Entries(%d, %d)[%d] = index %d term %d", step, lo, hi, k, e.GetIndex(), e.GetTerm())
			}
		}
	}
}

// entryFromDisk reads entry i from the file, past the tail.
func (s *Storage) entryFromDisk(i uint64) (*pb.Entry, error) {
	var e *pb.Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		e, err = readEntry(tx.Bucket(entriesBucket), i)
		return err
	})
	return e, err
}

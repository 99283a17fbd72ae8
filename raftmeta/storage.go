package raftmeta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/raftmeta/fsm"
)

var (
	stateBucket   = []byte("raft")
	entriesBucket = []byte("entries")

	keyHardState  = []byte("hardstate")
	keySnapMeta   = []byte("snapmeta")
	keySnapData   = []byte("snapdata")
	keyConfState  = []byte("confstate")
	keyConfIndex  = []byte("confindex")
	keyOffset     = []byte("offset")
	keyOffsetTerm = []byte("offsetterm")
	keyCatchUp    = []byte("catchup")
)

// Storage is a raft.Storage kept in one bbolt file. Every mutating method
// commits (and so fsyncs) before it returns. It is safe for concurrent use:
// raft reads it from its own goroutine while the node's loop writes it.
type Storage struct {
	db *bolt.DB

	mu sync.Mutex // guards the cached fields below
	// Invariant: offset <= last, snapIndex <= last, and every index in
	// (offset, last] has an entry in entriesBucket.
	offset     uint64 // index of the last compacted entry (the "dummy" entry)
	offsetTerm uint64 // term of the entry at offset
	last       uint64 // index of the last stored entry (offset when none)
	hard       *pb.HardState
	// hardUnsaved: hard differs from the stored hard state in its commit
	// index only; the next write stores it.
	hardUnsaved bool
	conf        *pb.ConfState
	confIndex   uint64 // log index of the conf change that produced conf
	snapMeta    *pb.SnapshotMetadata
	tail        logTail // the newest entries, ending at last
}

// OpenStorage opens (creating if needed) the raft log file at path.
func OpenStorage(path string) (*Storage, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("raftmeta storage %s: %w", path, err)
	}
	s := &Storage{db: db}
	if err := s.load(); err != nil {
		db.Close()
		return nil, fmt.Errorf("raftmeta storage %s: %w", path, err)
	}
	return s, nil
}

// load creates the buckets and fills the cached fields from disk.
func (s *Storage) load() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		st, err := tx.CreateBucketIfNotExists(stateBucket)
		if err != nil {
			return err
		}
		ents, err := tx.CreateBucketIfNotExists(entriesBucket)
		if err != nil {
			return err
		}
		s.hard = &pb.HardState{}
		s.conf = &pb.ConfState{}
		s.snapMeta = &pb.SnapshotMetadata{ConfState: &pb.ConfState{}}
		if err := unmarshalIfSet(st.Get(keyHardState), s.hard); err != nil {
			return fmt.Errorf("hard state: %w", err)
		}
		if err := unmarshalIfSet(st.Get(keyConfState), s.conf); err != nil {
			return fmt.Errorf("conf state: %w", err)
		}
		if err := unmarshalIfSet(st.Get(keySnapMeta), s.snapMeta); err != nil {
			return fmt.Errorf("snapshot metadata: %w", err)
		}
		s.snapMeta = pb.EnsureSnapshotMetadata(s.snapMeta)
		s.confIndex = fsm.GetU64(st.Get(keyConfIndex))
		s.offset = fsm.GetU64(st.Get(keyOffset))
		s.offsetTerm = fsm.GetU64(st.Get(keyOffsetTerm))
		s.last = s.offset
		if k, _ := ents.Cursor().Last(); k != nil {
			if len(k) != 8 {
				return fmt.Errorf("bad entry key length %d", len(k))
			}
			s.last = binary.BigEndian.Uint64(k)
		}
		return nil
	})
}

// Close stores a commit index not yet written, then closes the file.
func (s *Storage) Close() error {
	s.mu.Lock()
	var hs *pb.HardState
	if s.hardUnsaved {
		hs = proto.Clone(s.hard).(*pb.HardState)
		s.hardUnsaved = false
	}
	s.mu.Unlock()
	var err error
	if hs != nil {
		err = s.db.Update(func(tx *bolt.Tx) error { return putProto(tx.Bucket(stateBucket), keyHardState, hs) })
	}
	return errors.Join(err, s.db.Close())
}

// IsEmpty reports whether nothing was ever stored: no hard state, no
// entries and no snapshot. A member whose storage is empty has never taken
// part in a cluster (or lost its data).
func (s *Storage) IsEmpty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last == 0 && raft.IsEmptyHardState(s.hard) && s.snapMeta.GetIndex() == 0
}

// InitialState returns the saved hard state and the latest applied
// configuration (see SetConfState).
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.hard).(*pb.HardState), proto.Clone(s.conf).(*pb.ConfState), nil
}

// ConfState returns the latest applied configuration and the log index of
// the entry that produced it.
func (s *Storage) ConfState() (*pb.ConfState, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.conf).(*pb.ConfState), s.confIndex
}

// FirstIndex returns the index of the first entry that may be read.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offset + 1, nil
}

// LastIndex returns the index of the last stored entry.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

// bounds returns offset, offsetTerm and last under the lock.
func (s *Storage) bounds() (offset, offsetTerm, last uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offset, s.offsetTerm, s.last
}

// Term returns the term of the entry at index i.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	offset, offsetTerm, last := s.offset, s.offsetTerm, s.last
	term, cached := s.tail.term(i)
	s.mu.Unlock()
	if cached {
		return term, nil
	}
	switch {
	case i < offset:
		return 0, raft.ErrCompacted
	case i == offset:
		return offsetTerm, nil
	case i > last:
		return 0, raft.ErrUnavailable
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		e, err := readEntry(tx.Bucket(entriesBucket), i)
		if err != nil {
			return err
		}
		term = e.GetTerm()
		return nil
	})
	if err != nil && !errors.Is(err, raft.ErrUnavailable) {
		return 0, err
	}
	if errors.Is(err, raft.ErrUnavailable) {
		// Compacted between reading the bounds and the transaction.
		return 0, raft.ErrCompacted
	}
	return term, nil
}

// Entries returns the entries in [lo, hi), at least one and then as many as
// fit in maxSize bytes.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	offset, last := s.offset, s.last
	if lo > offset && s.tail.covers(lo, hi) {
		out := s.tail.slice(lo, hi, maxSize)
		s.mu.Unlock()
		return out, nil
	}
	s.mu.Unlock()
	if lo <= offset {
		return nil, raft.ErrCompacted
	}
	if hi > last+1 || lo > hi {
		return nil, fmt.Errorf("raftmeta: entries [%d, %d) out of bound, last index %d", lo, hi, last)
	}
	if last == offset {
		return nil, raft.ErrUnavailable
	}
	var out []*pb.Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		out = nil
		var size uint64
		c := tx.Bucket(entriesBucket).Cursor()
		want := lo
		for k, v := c.Seek(fsm.U64Key(lo)); k != nil && want < hi; k, v = c.Next() {
			if binary.BigEndian.Uint64(k) != want {
				return raft.ErrCompacted
			}
			e := &pb.Entry{}
			if err := proto.Unmarshal(v, e); err != nil {
				return fmt.Errorf("raftmeta: entry %d: %w", want, err)
			}
			size += uint64(proto.Size(e))
			if len(out) > 0 && size > maxSize {
				break
			}
			out = append(out, e)
			want++
		}
		if len(out) == 0 {
			return raft.ErrCompacted
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Snapshot returns the most recent snapshot, with its data.
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	meta := proto.Clone(s.snapMeta).(*pb.SnapshotMetadata)
	s.mu.Unlock()
	snap := &pb.Snapshot{Metadata: meta}
	if meta.GetIndex() == 0 {
		return snap, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		snap.Data = append([]byte(nil), tx.Bucket(stateBucket).Get(keySnapData)...)
		return nil
	})
	return snap, err
}

// SnapshotIndex returns the index of the stored snapshot (0 when none).
func (s *Storage) SnapshotIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapMeta.GetIndex()
}

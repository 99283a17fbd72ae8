package raftmeta

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/raftmeta/fsm"
)

// Save durably stores what one Ready asks for, in one transaction: first the
// snapshot (which replaces the whole log), then the entries (truncating any
// conflicting suffix), then the hard state. It returns once bbolt has
// committed, so the Ready's messages may be sent afterwards.
func (s *Storage) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot) error {
	hasSnap := snap != nil && !raft.IsEmptySnap(snap)
	hasHard := hs != nil && !raft.IsEmptyHardState(hs)
	if !hasSnap && !hasHard && len(ents) == 0 {
		return nil
	}
	s.mu.Lock()
	if !hasSnap && len(ents) == 0 && !raft.MustSync(hs, s.hard, 0) {
		// Only the commit index moved. Raft does not need it durable (a
		// restart relearns it from the leader, and prepareRestart copes
		// with a state machine ahead of it), so it rides along with the
		// next write instead of costing a commit of its own.
		s.hard = proto.Clone(hs).(*pb.HardState)
		s.hardUnsaved = true
		s.mu.Unlock()
		return nil
	}
	next := storageState{offset: s.offset, offsetTerm: s.offsetTerm, last: s.last, snap: s.snapMeta}
	if !hasHard && s.hardUnsaved {
		hs, hasHard = proto.Clone(s.hard).(*pb.HardState), true
	}
	s.mu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		if hasSnap {
			if err := putSnapshot(tx, snap, &next); err != nil {
				return err
			}
		}
		if err := appendEntries(tx, ents, &next); err != nil {
			return err
		}
		if hasHard {
			return putProto(tx.Bucket(stateBucket), keyHardState, hs)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftmeta: save: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset, s.offsetTerm, s.last = next.offset, next.offsetTerm, next.last
	if hasSnap {
		s.tail.reset()
	}
	for len(ents) > 0 && ents[0].GetIndex() <= next.offset {
		ents = ents[1:]
	}
	s.tail.append(ents)
	if hasSnap {
		s.snapMeta = proto.Clone(snap.GetMetadata()).(*pb.SnapshotMetadata)
		s.conf = proto.Clone(pb.EnsureConfState(snap.GetMetadata().GetConfState())).(*pb.ConfState)
		s.confIndex = snap.GetMetadata().GetIndex()
	}
	if hasHard {
		s.hard = proto.Clone(hs).(*pb.HardState)
		s.hardUnsaved = false
	}
	return nil
}

// storageState is the cached bounds a write transaction updates.
type storageState struct {
	offset, offsetTerm, last uint64
	snap                     *pb.SnapshotMetadata
}

// putSnapshot replaces the log with snap inside tx. An older snapshot than
// the stored one is ignored.
func putSnapshot(tx *bolt.Tx, snap *pb.Snapshot, st *storageState) error {
	meta := snap.GetMetadata()
	if meta.GetIndex() <= st.snap.GetIndex() {
		return nil
	}
	b := tx.Bucket(stateBucket)
	if err := putProto(b, keySnapMeta, meta); err != nil {
		return err
	}
	if err := b.Put(keySnapData, snap.GetData()); err != nil {
		return err
	}
	if err := putProto(b, keyConfState, pb.EnsureConfState(meta.GetConfState())); err != nil {
		return err
	}
	if err := b.Put(keyConfIndex, fsm.U64Key(meta.GetIndex())); err != nil {
		return err
	}
	if err := tx.DeleteBucket(entriesBucket); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		return err
	}
	if _, err := tx.CreateBucket(entriesBucket); err != nil {
		return err
	}
	st.offset, st.offsetTerm, st.last = meta.GetIndex(), meta.GetTerm(), meta.GetIndex()
	st.snap = meta
	return putOffset(b, st.offset, st.offsetTerm)
}

// appendEntries writes ents, deleting any stored entry at or after the first
// new index (raft only sends a suffix that replaces a conflicting one).
func appendEntries(tx *bolt.Tx, ents []*pb.Entry, st *storageState) error {
	for len(ents) > 0 && ents[0].GetIndex() <= st.offset {
		ents = ents[1:]
	}
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].GetIndex()
	if first > st.last+1 {
		return fmt.Errorf("missing log entries: last index %d, append at %d", st.last, first)
	}
	b := tx.Bucket(entriesBucket)
	for i := first; i <= st.last; i++ {
		if err := b.Delete(fsm.U64Key(i)); err != nil {
			return err
		}
	}
	for _, e := range ents {
		if err := putProto(b, fsm.U64Key(e.GetIndex()), e); err != nil {
			return err
		}
	}
	st.last = ents[len(ents)-1].GetIndex()
	return nil
}

// CreateSnapshot records a snapshot of the state machine at index i (which
// must be stored and not older than the current snapshot), with the
// configuration cs in force at i. It does not compact the log.
func (s *Storage) CreateSnapshot(i uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	if i <= s.SnapshotIndex() {
		return nil, raft.ErrSnapOutOfDate
	}
	term, err := s.Term(i)
	if err != nil {
		return nil, fmt.Errorf("raftmeta: snapshot at %d: %w", i, err)
	}
	meta := &pb.SnapshotMetadata{Index: new(i), Term: new(term), ConfState: proto.Clone(pb.EnsureConfState(cs)).(*pb.ConfState)}
	// The stored commit index must not fall behind the stored snapshot, so
	// a commit index not yet written goes in the same transaction.
	s.mu.Lock()
	hs := proto.Clone(s.hard).(*pb.HardState)
	s.mu.Unlock()
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(stateBucket)
		if err := putProto(b, keySnapMeta, meta); err != nil {
			return err
		}
		if err := putProto(b, keyHardState, hs); err != nil {
			return err
		}
		return b.Put(keySnapData, data)
	})
	if err != nil {
		return nil, fmt.Errorf("raftmeta: snapshot at %d: %w", i, err)
	}
	s.mu.Lock()
	s.snapMeta = meta
	s.hardUnsaved = s.hard.GetCommit() != hs.GetCommit()
	s.mu.Unlock()
	return &pb.Snapshot{Metadata: proto.Clone(meta).(*pb.SnapshotMetadata), Data: data}, nil
}

// Compact discards every entry at or below index i. i must not be above
// the last index; compacting at or below the current offset returns
// raft.ErrCompacted.
func (s *Storage) Compact(i uint64) error {
	offset, _, last := s.bounds()
	if i <= offset {
		return raft.ErrCompacted
	}
	if i > last {
		return fmt.Errorf("raftmeta: compact %d beyond last index %d", i, last)
	}
	term, err := s.Term(i)
	if err != nil {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(entriesBucket)
		for j := offset + 1; j <= i; j++ {
			if err := b.Delete(fsm.U64Key(j)); err != nil {
				return err
			}
		}
		return putOffset(tx.Bucket(stateBucket), i, term)
	})
	if err != nil {
		return fmt.Errorf("raftmeta: compact %d: %w", i, err)
	}
	s.mu.Lock()
	s.offset, s.offsetTerm = i, term
	s.tail.compact(i)
	s.mu.Unlock()
	return nil
}

// SetConfState durably records the configuration produced by the conf
// change entry at index, so a restart resumes with it.
func (s *Storage) SetConfState(cs *pb.ConfState, index uint64) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(stateBucket)
		if err := putProto(b, keyConfState, cs); err != nil {
			return err
		}
		return b.Put(keyConfIndex, fsm.U64Key(index))
	})
	if err != nil {
		return fmt.Errorf("raftmeta: conf state: %w", err)
	}
	s.mu.Lock()
	s.conf, s.confIndex = proto.Clone(cs).(*pb.ConfState), index
	s.mu.Unlock()
	return nil
}

// SetCatchUpToken durably records that this member is rebuilding a wiped
// log under token (0 clears it), so a restart mid-way keeps refusing to
// vote.
func (s *Storage) SetCatchUpToken(token uint64) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(stateBucket)
		if token == 0 {
			return b.Delete(keyCatchUp)
		}
		return b.Put(keyCatchUp, fsm.U64Key(token))
	})
	if err != nil {
		return fmt.Errorf("raftmeta: catch-up marker: %w", err)
	}
	return nil
}

// CatchUpToken returns the recorded catch-up token (0 when none). It
// fails when the file cannot be read, e.g. after Close.
func (s *Storage) CatchUpToken() (uint64, error) {
	var token uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		token = fsm.GetU64(tx.Bucket(stateBucket).Get(keyCatchUp))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("raftmeta: catch-up marker: %w", err)
	}
	return token, nil
}

func putOffset(b *bolt.Bucket, offset, term uint64) error {
	if err := b.Put(keyOffset, fsm.U64Key(offset)); err != nil {
		return err
	}
	return b.Put(keyOffsetTerm, fsm.U64Key(term))
}

func readEntry(b *bolt.Bucket, i uint64) (*pb.Entry, error) {
	v := b.Get(fsm.U64Key(i))
	if v == nil {
		return nil, raft.ErrUnavailable
	}
	e := &pb.Entry{}
	if err := proto.Unmarshal(v, e); err != nil {
		return nil, fmt.Errorf("raftmeta: entry %d: %w", i, err)
	}
	return e, nil
}

func putProto(b *bolt.Bucket, key []byte, m proto.Message) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return b.Put(key, v)
}

func unmarshalIfSet(v []byte, m proto.Message) error {
	if v == nil {
		return nil
	}
	return proto.Unmarshal(v, m)
}

package raftmeta

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func ent(index, term uint64) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: []byte{byte(index)}}
}

func openTestStorage(t *testing.T, path string) *Storage {
	t.Helper()
	s, err := OpenStorage(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStorageEmpty(t *testing.T) {
	s := openTestStorage(t, filepath.Join(t.TempDir(), "raft.db"))
	defer s.Close()
	if !s.IsEmpty() {
		t.Fatal("new storage not empty")
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 1 || last != 0 {
		t.Fatalf("first %d last %d, want 1 0", first, last)
	}
	if _, err := s.Entries(1, 1, 100); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Entries on empty: %v", err)
	}
	if term, err := s.Term(0); err != nil || term != 0 {
		t.Fatalf("Term(0) = %d, %v", term, err)
	}
	if _, err := s.Term(1); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Term(1) = %v", err)
	}
}

func TestStorageAppendTermEntriesCompact(t *testing.T) {
	s := openTestStorage(t, filepath.Join(t.TempDir(), "raft.db"))
	defer s.Close()
	var ents []*pb.Entry
	for i := uint64(1); i <= 10; i++ {
		ents = append(ents, ent(i, 1+i/5))
	}
	if err := s.Save(nil, ents, nil); err != nil {
		t.Fatal(err)
	}
	// A conflicting suffix replaces 8..10 with 8..9 of a later term.
	if err := s.Save(nil, []*pb.Entry{ent(8, 7), ent(9, 7)}, nil); err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastIndex(); last != 9 {
		t.Fatalf("last = %d, want 9", last)
	}
	if term, _ := s.Term(8); term != 7 {
		t.Fatalf("Term(8) = %d, want 7", term)
	}
	got, err := s.Entries(2, 9, 1<<20)
	if err != nil || len(got) != 7 || got[0].GetIndex() != 2 || got[6].GetIndex() != 8 {
		t.Fatalf("Entries(2,9) = %v, %v", got, err)
	}
	one, err := s.Entries(2, 9, 0)
	if err != nil || len(one) != 1 {
		t.Fatalf("Entries with maxSize 0 must return one entry: %v, %v", one, err)
	}
	if err := s.Save(nil, []*pb.Entry{ent(12, 7)}, nil); err == nil {
		t.Fatal("appending past a gap must fail")
	}
	if err := s.Compact(4); err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 5 {
		t.Fatalf("first after compact = %d, want 5", first)
	}
	if _, err := s.Entries(4, 6, 1<<20); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries below first: %v", err)
	}
	if _, err := s.Term(3); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Term below offset: %v", err)
	}
	if term, err := s.Term(4); err != nil || term != 1 {
		t.Fatalf("Term(offset) = %d, %v", term, err)
	}
	if _, err := s.Term(10); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Term past last: %v", err)
	}
	if err := s.Compact(4); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("second Compact(4): %v", err)
	}
}

func TestStorageReopenKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openTestStorage(t, path)
	hs := &pb.HardState{Term: new(uint64(3)), Vote: new(uint64(2)), Commit: new(uint64(5))}
	ents := []*pb.Entry{ent(1, 1), ent(2, 1), ent(3, 2), ent(4, 3), ent(5, 3), ent(6, 3)}
	if err := s.Save(hs, ents, nil); err != nil {
		t.Fatal(err)
	}
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	if err := s.SetConfState(cs, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSnapshot(4, cs, []byte("state@4")); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(3); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestStorage(t, path)
	defer s.Close()
	if s.IsEmpty() {
		t.Fatal("reopened storage reports empty")
	}
	gotHS, gotCS, _ := s.InitialState()
	if !proto.Equal(gotHS, hs) || gotCS.Equivalent(cs) != nil {
		t.Fatalf("initial state %v / %v, want %v / %v", gotHS, gotCS, hs, cs)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 4 || last != 6 {
		t.Fatalf("first %d last %d, want 4 6", first, last)
	}
	snap, _ := s.Snapshot()
	if snap.GetMetadata().GetIndex() != 4 || snap.GetMetadata().GetTerm() != 3 || string(snap.GetData()) != "state@4" {
		t.Fatalf("snapshot %v", snap)
	}
	got, err := s.Entries(4, 7, 1<<20)
	if err != nil || len(got) != 3 || got[2].GetTerm() != 3 {
		t.Fatalf("entries after reopen %v %v", got, err)
	}
	if _, err := s.CreateSnapshot(4, cs, nil); !errors.Is(err, raft.ErrSnapOutOfDate) {
		t.Fatalf("older snapshot: %v", err)
	}
}

func TestStorageApplySnapshotReplacesLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openTestStorage(t, path)
	if err := s.Save(nil, []*pb.Entry{ent(1, 1), ent(2, 1)}, nil); err != nil {
		t.Fatal(err)
	}
	snap := &pb.Snapshot{Data: []byte("x"), Metadata: &pb.SnapshotMetadata{
		Index: new(uint64(50)), Term: new(uint64(4)), ConfState: &pb.ConfState{Voters: []uint64{1}, Learners: []uint64{2}}}}
	hs := &pb.HardState{Term: new(uint64(4)), Commit: new(uint64(50))}
	if err := s.Save(hs, []*pb.Entry{ent(51, 4)}, snap); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTestStorage(t, path)
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 51 || last != 51 {
		t.Fatalf("first %d last %d, want 51 51", first, last)
	}
	if term, _ := s.Term(50); term != 4 {
		t.Fatalf("Term(snapshot index) = %d", term)
	}
	if cs, idx := s.ConfState(); idx != 50 || len(cs.GetLearners()) != 1 {
		t.Fatalf("conf state %v at %d", cs, idx)
	}
	if _, err := s.Entries(2, 3, 100); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("old entries: %v", err)
	}
}

// TestStorageWithRawNode drives raft's RawNode over the bbolt storage for a
// single-voter group, reopening between steps.
func TestStorageWithRawNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openTestStorage(t, path)
	cfg := &raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, Logger: raftLogger{testLogger()}}
	rn, err := raft.NewRawNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.Bootstrap([]raft.Peer{{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		for rn.HasReady() {
			rd := rn.Ready()
			if err := s.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
				t.Fatal(err)
			}
			for _, e := range rd.CommittedEntries {
				if e.GetType() == pb.EntryConfChange {
					cc := &pb.ConfChange{}
					if err := proto.Unmarshal(e.GetData(), cc); err != nil {
						t.Fatal(err)
					}
					rn.ApplyConfChange(cc)
				}
			}
			rn.Advance(rd)
		}
		if i == 0 {
			if err := rn.Campaign(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := rn.Propose([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for rn.HasReady() {
		rd := rn.Ready()
		if err := s.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
			t.Fatal(err)
		}
		rn.Advance(rd)
	}
	last, _ := s.LastIndex()
	hs, _, _ := s.InitialState()
	if last < 4 || hs.GetCommit() != last {
		t.Fatalf("last %d commit %d", last, hs.GetCommit())
	}
	s.Close()
	s = openTestStorage(t, path)
	defer s.Close()
	rn, err = raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, Logger: raftLogger{testLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if st := rn.Status(); st.HardState.GetCommit() != last {
		t.Fatalf("restarted commit %d, want %d", st.HardState.GetCommit(), last)
	}
}

// storedHardState reads the hard state a crash would leave: the file's
// bytes as they are now, opened as a copy.
func storedHardState(t *testing.T, path string) *pb.HardState {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "crash-copy.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestStorage(t, cp)
	defer s.Close()
	hs, _, _ := s.InitialState()
	return hs
}

// A Ready that only moves the commit index costs no write: raft does not
// need it durable. It is stored with the next write, with a snapshot (so
// the stored snapshot is never beyond the stored commit), or at Close.
func TestStorageCommitOnlyChangesRideAlong(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openTestStorage(t, path)
	hs := func(commit uint64) *pb.HardState {
		return &pb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(commit)}
	}
	if err := s.Save(hs(1), []*pb.Entry{ent(1, 1), ent(2, 1), ent(3, 1), ent(4, 1)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(hs(3), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := storedHardState(t, path).GetCommit(); got != 1 {
		t.Fatalf("stored commit %d after a commit-only change, want 1 (not written)", got)
	}
	if got, _, _ := s.InitialState(); got.GetCommit() != 3 {
		t.Fatalf("InitialState commit %d, want 3", got.GetCommit())
	}
	if _, err := s.CreateSnapshot(3, &pb.ConfState{Voters: []uint64{1}}, []byte("state@3")); err != nil {
		t.Fatal(err)
	}
	if got := storedHardState(t, path).GetCommit(); got != 3 {
		t.Fatalf("stored commit %d after a snapshot at 3, want 3", got)
	}
	if err := s.Save(hs(4), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(nil, []*pb.Entry{ent(5, 1)}, nil); err != nil {
		t.Fatal(err)
	}
	if got := storedHardState(t, path).GetCommit(); got != 4 {
		t.Fatalf("stored commit %d after the next append, want 4", got)
	}
	if err := s.Save(hs(5), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStorage(t, path)
	defer s.Close()
	if got, _, _ := s.InitialState(); got.GetCommit() != 5 {
		t.Fatalf("commit %d after a clean close, want 5", got.GetCommit())
	}
	// A term or vote change is written at once.
	if err := s.Save(&pb.HardState{Term: new(uint64(2)), Vote: new(uint64(0)), Commit: new(uint64(5))}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := storedHardState(t, path).GetTerm(); got != 2 {
		t.Fatalf("stored term %d after a term change, want 2", got)
	}
}

// A catch-up marker that cannot be read is an error, never "no marker":
// taking it for 0 would let a member rebuilding a wiped log vote.
func TestStorageCatchUpTokenReportsReadErrors(t *testing.T) {
	s := openTestStorage(t, filepath.Join(t.TempDir(), "raft.db"))
	if err := s.SetCatchUpToken(7); err != nil {
		t.Fatal(err)
	}
	if token, err := s.CatchUpToken(); err != nil || token != 7 {
		t.Fatalf("CatchUpToken = %d, %v; want 7", token, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if token, err := s.CatchUpToken(); err == nil {
		t.Fatalf("CatchUpToken after Close = %d with no error", token)
	}
}

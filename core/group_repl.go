package core

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/felixmq/felix/internal/atomicfile"
)

// Replicating group state (docs/protocol.md, "Replication"; issue #19).
//
// A shard's group state (cursors, dead letters, redrives: what
// groups.state persists) follows the shard's log to its followers. Every
// change the leader persists moves the state's version: the leader's
// generation and a count of the changes made at it, written into the
// state file after the change (a line with G empty and V set). The
// leader ships the whole state, encoded as a snapshot of that file, to
// each follower when its version is newer than what the follower last
// answered; the follower keeps it only if it is newer than what its copy
// holds and replaces its groups.state with it atomically (temporary
// file, fsync, rename). A taking-over leader takes the newest version
// among the copies it fenced (roles/broker/repl_recover.go), so on a
// Quorum shard whose leader answered a group change only once a majority
// held it, the new leader starts from a state at least as new.

// GroupVersion orders the versions of a shard's group state: by the
// generation of the leader that made it, then by the changes it made.
type GroupVersion struct {
	Generation uint64 `json:"generation"`
	Seq        uint64 `json:"seq"`
}

// Less reports whether v is older than o.
func (v GroupVersion) Less(o GroupVersion) bool {
	if v.Generation != o.Generation {
		return v.Generation < o.Generation
	}
	return v.Seq < o.Seq
}

func (v GroupVersion) op() groupOp {
	return groupOp{V: &[2]uint64{v.Generation, v.Seq}}
}

// GroupsReplication is implemented by a shard's Replication that ships
// group state: GroupsChanged is called (under the groups' lock, so it
// must not block) after each change is persisted.
type GroupsReplication interface {
	GroupsChanged()
}

// groupSnapshotMax bounds the state one snapshot carries: a state larger
// than this is not replicated (the shipper logs it), since a
// peer call carries it whole.
const groupSnapshotMax = 16 << 20

// Version returns the state's current version.
func (g *Groups) Version() GroupVersion {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ver
}

// Snapshot returns the persisted state, encoded as a state file, and its
// version.
func (g *Groups) Snapshot() ([]byte, GroupVersion, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file == nil {
		return nil, GroupVersion{}, g.sh.errClosed()
	}
	b := encodeGroupSnapshot(g.saved, g.ver)
	if len(b) > groupSnapshotMax {
		return nil, g.ver, fmt.Errorf("the group state of shard %d is %d bytes, over the %d a replication call carries", g.sh.index, len(b), groupSnapshotMax)
	}
	return b, g.ver, nil
}

// OpenedGroups returns the shard's groups if they are open, without
// opening them.
func (sh *Shard) OpenedGroups() *Groups { return sh.groups.Load() }

// GroupsVersion returns the version of the group state the replica's
// directory holds (zero with none).
func (r *Replica) GroupsVersion() (GroupVersion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ver, err := r.readGroupsLocked()
	return ver, err
}

// GroupsSnapshot returns the group state the replica's directory holds,
// as a state file (its good lines), and its version.
func (r *Replica) GroupsSnapshot() ([]byte, GroupVersion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readGroupsLocked()
}

func (r *Replica) readGroupsLocked() ([]byte, GroupVersion, error) {
	b, err := os.ReadFile(filepath.Join(r.dir, GroupStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, GroupVersion{}, nil
	}
	if err != nil {
		return nil, GroupVersion{}, err
	}
	_, good, ver, err := replayGroupFile(bytes.NewReader(b))
	if err != nil {
		return nil, GroupVersion{}, err
	}
	if len(b) > groupSnapshotMax {
		return nil, ver, fmt.Errorf("group state of %s is %d bytes, over %d", r.dir, len(b), groupSnapshotMax)
	}
	return b[:good], ver, nil
}

// StoreGroups replaces the replica's group state with snapshot, at
// version ver, sent by the leader of generation generation, unless the
// replica holds a newer one. It returns the version the replica holds
// afterwards. A generation older than the replica's fence is refused, as
// its records would be.
func (r *Replica) StoreGroups(generation uint64, ver GroupVersion, snapshot []byte) (GroupVersion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if generation < r.fenced {
		return GroupVersion{}, errStaleGeneration(r, generation)
	}
	_, cur, err := r.readGroupsLocked()
	if err != nil {
		cur = GroupVersion{} // an unreadable state is replaced
	}
	if !cur.Less(ver) {
		return cur, nil
	}
	_, good, got, err := replayGroupFile(bytes.NewReader(snapshot))
	if err != nil || good != int64(len(snapshot)) || got != ver {
		return cur, fmt.Errorf("group state snapshot for version %v is malformed (%d of %d bytes good, version %v)", ver, good, len(snapshot), got)
	}
	if err := atomicfile.Write(filepath.Join(r.dir, GroupStateFile), snapshot, 0o644); err != nil {
		return cur, err
	}
	return ver, nil
}

// HasGroupState reports whether the shard's directory holds a group
// state file (a durable shard only).
func (sh *Shard) HasGroupState() bool {
	if sh.log == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(ShardDir(sh.stream.cfg.Storage.Dir, sh.stream.key, sh.index), GroupStateFile))
	return err == nil
}

// Shard returns the shard whose groups these are.
func (g *Groups) Shard() *Shard { return g.sh }

// GroupCursor returns group's cursor in the state the replica's
// directory holds.
func (r *Replica) GroupCursor(group string) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _, err := r.readGroupsLocked()
	if err != nil {
		return 0, false
	}
	state, _, _, err := replayGroupFile(bytes.NewReader(b))
	if err != nil || state[group] == nil {
		return 0, false
	}
	return state[group].cursor, true
}

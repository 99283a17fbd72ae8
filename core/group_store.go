package core

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// The group state file: a consumer group's cursor, dead letters and
// redriven offsets, kept beside the shard's log in the shard's directory
// (GroupStateFile). It is an append-only file of lines, each
// "<crc32c of the JSON, 8 hex digits> <JSON op>\n"; opening it replays
// every line. A line whose CRC does not match, or a last line without its
// newline (a write cut short by a crash), ends the replay and the file is
// cut back to the last good line. Once the file is several times larger
// than the state it holds, it is rewritten as one line per fact into a
// temporary file that is fsynced and renamed over it.
//
// Each change is written before the operation that made it is answered;
// with fsync (the shard's fsync policy always) it is also on disk by then.

// GroupStateFile is the name of a shard's group state file inside its
// shard directory.
const GroupStateFile = "groups.state"

// groupCompactMin is the file size below which the file is never
// rewritten.
const groupCompactMin = 1 << 20

// groupOp is one line of the state file. Exactly one member besides G
// is set.
type groupOp struct {
	G       string  `json:"g"`
	Cursor  *uint64 `json:"c,omitempty"` // the group's cursor is now this (creates it)
	Dead    *uint64 `json:"d,omitempty"` // offset listed as a dead letter
	Discard *uint64 `json:"x,omitempty"` // offset dropped from the dead letters
	Redrive *uint64 `json:"r,omitempty"` // offset moved from the dead letters back into play
	Done    *uint64 `json:"a,omitempty"` // a redriven offset finished
	Delete  bool    `json:"del,omitempty"`
	// V, on a line of its own with G empty, is the state's version
	// after the lines before it (group_repl.go): [generation, sequence].
	V *[2]uint64 `json:"v,omitempty"`
}

// persisted is what the file holds for one group.
type persisted struct {
	cursor   uint64
	dead     map[uint64]struct{}
	redriven map[uint64]struct{}
}

var groupCRC = crc32.MakeTable(crc32.Castagnoli)

// groupFile is an open state file. Its owner (Groups) serializes every
// call.
type groupFile struct {
	path  string
	f     *os.File
	fsync bool
	size  int64
	// live is the size of the file's state written as a snapshot, the
	// measure compaction compares against.
	live int64
}

// openGroupFile opens (creating) the state file in dir and replays it.
func openGroupFile(dir string, fsync bool) (*groupFile, map[string]*persisted, GroupVersion, error) {
	path := filepath.Join(dir, GroupStateFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, GroupVersion{}, fmt.Errorf("group state: %w", err)
	}
	state, good, ver, err := replayGroupFile(f)
	if err != nil {
		f.Close()
		return nil, nil, GroupVersion{}, fmt.Errorf("group state %s: %w", path, err)
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, nil, GroupVersion{}, fmt.Errorf("group state %s: truncate torn tail: %w", path, err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, GroupVersion{}, fmt.Errorf("group state %s: %w", path, err)
	}
	return &groupFile{path: path, f: f, fsync: fsync, size: good, live: good}, state, ver, nil
}

// replayGroupFile reads every good line and returns the state, the
// length of the good prefix and the last version line's version.
func replayGroupFile(r io.Reader) (map[string]*persisted, int64, GroupVersion, error) {
	state := map[string]*persisted{}
	br := bufio.NewReader(r)
	var good int64
	var ver GroupVersion
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return state, good, ver, nil // a line without its newline is torn
		}
		if err != nil {
			return nil, 0, GroupVersion{}, err
		}
		op, ok := parseGroupLine(line)
		if !ok {
			return state, good, ver, nil
		}
		if op.V != nil {
			ver = GroupVersion{Generation: op.V[0], Seq: op.V[1]}
		} else {
			applyGroupOp(state, op)
		}
		good += int64(len(line))
	}
}

func parseGroupLine(line []byte) (groupOp, bool) {
	var op groupOp
	sum, body, ok := bytes.Cut(bytes.TrimSuffix(line, []byte{'\n'}), []byte{' '})
	if !ok || len(sum) != 8 {
		return op, false
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || crc32.Checksum(body, groupCRC) != uint32(want) {
		return op, false
	}
	if json.Unmarshal(body, &op) != nil || (op.G == "") != (op.V != nil) {
		return op, false
	}
	return op, true
}

// applyGroupOp folds one op into state.
func applyGroupOp(state map[string]*persisted, op groupOp) {
	if op.Delete {
		delete(state, op.G)
		return
	}
	p := state[op.G]
	if p == nil {
		p = &persisted{dead: map[uint64]struct{}{}, redriven: map[uint64]struct{}{}}
		state[op.G] = p
	}
	switch {
	case op.Cursor != nil:
		p.cursor = *op.Cursor
	case op.Dead != nil:
		p.dead[*op.Dead] = struct{}{}
		delete(p.redriven, *op.Dead)
	case op.Discard != nil:
		delete(p.dead, *op.Discard)
	case op.Redrive != nil:
		delete(p.dead, *op.Redrive)
		p.redriven[*op.Redrive] = struct{}{}
	case op.Done != nil:
		delete(p.redriven, *op.Done)
	}
}

func appendGroupLine(buf []byte, op groupOp) []byte {
	body, _ := json.Marshal(op) // a struct of strings and numbers always encodes
	buf = fmt.Appendf(buf, "%08x ", crc32.Checksum(body, groupCRC))
	buf = append(buf, body...)
	return append(buf, '\n')
}

// write appends ops and, under fsync, syncs the file.
func (gf *groupFile) write(ops ...groupOp) error {
	if gf.f == nil {
		return errors.New("group state file is closed")
	}
	var buf []byte
	for _, op := range ops {
		buf = appendGroupLine(buf, op)
	}
	n, err := gf.f.Write(buf)
	gf.size += int64(n)
	if err != nil {
		return fmt.Errorf("group state %s: %w", gf.path, err)
	}
	if gf.fsync {
		if err := gf.f.Sync(); err != nil {
			return fmt.Errorf("group state %s: fsync: %w", gf.path, err)
		}
	}
	return nil
}

// wantsCompaction reports whether the file has grown well past its state.
func (gf *groupFile) wantsCompaction() bool {
	return gf.size > groupCompactMin && gf.size > 4*gf.live
}

// rewrite replaces the file with a snapshot of state at version ver.
func (gf *groupFile) rewrite(state map[string]*persisted, ver GroupVersion) error {
	buf := encodeGroupSnapshot(state, ver)
	tmp := gf.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := os.Rename(tmp, gf.path); err != nil {
		f.Close()
		return err
	}
	syncDir(filepath.Dir(gf.path))
	gf.f.Close()
	gf.f = f
	gf.size, gf.live = int64(len(buf)), int64(len(buf))
	return nil
}

// encodeGroupSnapshot writes state as one line per fact, then its
// version.
func encodeGroupSnapshot(state map[string]*persisted, ver GroupVersion) []byte {
	var buf []byte
	names := make([]string, 0, len(state))
	for g := range state {
		names = append(names, g)
	}
	slices.Sort(names)
	for _, g := range names {
		p := state[g]
		c := p.cursor
		buf = appendGroupLine(buf, groupOp{G: g, Cursor: &c})
		for _, o := range sortedOffsets(p.dead) {
			buf = appendGroupLine(buf, groupOp{G: g, Dead: &o})
		}
		for _, o := range sortedOffsets(p.redriven) {
			buf = appendGroupLine(buf, groupOp{G: g, Redrive: &o})
		}
	}
	return appendGroupLine(buf, ver.op())
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

func (gf *groupFile) close() {
	if gf.f != nil {
		gf.f.Close()
		gf.f = nil
	}
}

func sortedOffsets(m map[uint64]struct{}) []uint64 {
	out := make([]uint64, 0, len(m))
	for o := range m {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

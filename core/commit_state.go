package core

import (
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// A durable shard's commit state (atomic commits, commit.go): key → value,
// each value versioned by the offset of the commit that wrote it.
//
// An entry is applied under the shard's claim lock when its commit's
// record is appended, and becomes visible to StateGet once the shard's
// read mark (nextPub: durable, and on a Quorum shard held by a majority)
// passes its version, as the record itself becomes readable. So a key
// holds the newest visible entry plus any newer ones still in flight.
//
// There is no snapshot: at open the state is rebuilt from the commit
// records of the retained log (rebuildCommitState). A record retention
// drops takes its state with it.
//
// Bounded: entries are accounted at stateEntryOverhead bytes plus key and
// value; a commit that would take the shard past Config.CommitStateMaxBytes
// is refused overloaded (reason commit_state_full).

// DefaultCommitStateMaxBytes bounds each shard's commit state.
const DefaultCommitStateMaxBytes = 64 << 20

// stateEntryOverhead is what an entry costs beside its key and value: the
// entry struct, the slice header share and the map's per-key cost.
const stateEntryOverhead = 64

// commitStateHelp is the HELP text of the commit-state metrics.
var commitStateHelp = map[string]string{
	"felix_commit_state_bytes":         "Bytes of atomic-commit state held in memory by this broker's durable shards (keys, values and per-entry overhead).",
	"felix_commit_state_refused_total": "Atomic commits refused because their shard's state would pass FELIX_COMMIT_STATE_MAX_BYTES.",
	"felix_commit_state_rebuilt_total": "Commit records read to rebuild shards' state at open.",
}

// commitStateMetrics are the broker's commit-state metrics.
type commitStateMetrics struct {
	bytes   atomic.Int64
	refused *metrics.Counter
	rebuilt *metrics.Counter
}

func (m *commitStateMetrics) register(s *metrics.Set) {
	s.NewGauge("felix_commit_state_bytes", func() float64 { return float64(m.bytes.Load()) })
	m.refused = s.NewCounter("felix_commit_state_refused_total")
	m.rebuilt = s.NewCounter("felix_commit_state_rebuilt_total")
}

// StateOp is one state change of a commit: Value set under Key, or Key
// deleted.
type StateOp struct {
	Key    string
	Value  []byte
	Delete bool
}

// stateEntry is one version of a key.
type stateEntry struct {
	version uint64 // the offset of the commit that wrote it
	value   []byte
	deleted bool
}

func entryBytes(key string, value []byte) int64 {
	return int64(stateEntryOverhead + len(key) + len(value))
}

// commitState is a shard's state map.
type commitState struct {
	mu sync.Mutex
	// m holds each key's entries, oldest first, versions increasing.
	// Invariant: at most one entry of a key is visible and older than
	// every other (trim drops the rest).
	m     map[string][]stateEntry
	bytes int64 // Invariant: the sum of entryBytes over m
	limit int64
	met   *commitStateMetrics
}

func newCommitState(limit int64, met *commitStateMetrics) *commitState {
	return &commitState{m: map[string][]stateEntry{}, limit: limit, met: met}
}

// room reports whether ops fit under the limit, counting what they add
// before any older entry is trimmed.
func (s *commitState) room(ops []StateOp) (need, held int64, ok bool) {
	for _, op := range ops {
		need += entryBytes(op.Key, op.Value)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return need, s.bytes, s.bytes+need <= s.limit
}

// apply adds ops at version, trimming each key's entries that the
// shard's read mark hides. The caller holds the shard's claim lock (or
// the shard is not visible yet). The mark is loaded under mu, here and in
// get, so no trim can use a mark newer than a later get's.
func (s *commitState) apply(ops []StateOp, version uint64, mark *atomic.Uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	visible := mark.Load()
	for _, op := range ops {
		v := op.Value
		if op.Delete {
			v = nil
		}
		s.m[op.Key] = append(s.m[op.Key], stateEntry{version: version, value: v, deleted: op.Delete})
		s.add(entryBytes(op.Key, v))
		s.trimLocked(op.Key, visible)
	}
}

// get returns the newest entry of key whose version is below the shard's
// read mark.
func (s *commitState) get(key string, mark *atomic.Uint64) (stateEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	visible := mark.Load()
	es := s.trimLocked(key, visible)
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].version < visible {
			return es[i], !es[i].deleted
		}
	}
	return stateEntry{}, false
}

// trimLocked drops the entries of key that a newer visible entry hides,
// and the key when all that is left is a visible delete.
func (s *commitState) trimLocked(key string, visible uint64) []stateEntry {
	es := s.m[key]
	newest := -1
	for i, e := range es {
		if e.version < visible {
			newest = i
		}
	}
	for _, e := range es[:max(newest, 0)] {
		s.add(-entryBytes(key, e.value))
	}
	if newest > 0 {
		es = append(es[:0:0], es[newest:]...)
	}
	if len(es) == 1 && es[0].deleted && es[0].version < visible {
		s.add(-entryBytes(key, nil))
		delete(s.m, key)
		return nil
	}
	if len(es) == 0 {
		delete(s.m, key)
		return nil
	}
	s.m[key] = es
	return es
}

func (s *commitState) add(n int64) {
	s.bytes += n
	s.met.bytes.Add(n)
}

// Bytes returns what the state accounts.
func (s *commitState) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// forget drops everything (the shard closed).
func (s *commitState) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.met.bytes.Add(-s.bytes)
	s.m, s.bytes = map[string][]stateEntry{}, 0
}

// The state section of a commit record (log layout version 3), the
// shard's own encoding, big-endian:
//
//	count  u32
//	count × { op u8 (1 put, 2 delete), key_len u16, key, [put: value_len u32, value] }
const (
	stateOpPut    = 1
	stateOpDelete = 2
)

// MaxStateKeyBytes bounds a state key.
const MaxStateKeyBytes = math.MaxUint16

func encodeStateOps(ops []StateOp) []byte {
	n := 4
	for _, op := range ops {
		n += 3 + len(op.Key)
		if !op.Delete {
			n += 4 + len(op.Value)
		}
	}
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ops)))
	for _, op := range ops {
		if op.Delete {
			b = append(b, stateOpDelete)
		} else {
			b = append(b, stateOpPut)
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(op.Key)))
		b = append(b, op.Key...)
		if !op.Delete {
			b = binary.BigEndian.AppendUint32(b, uint32(len(op.Value)))
			b = append(b, op.Value...)
		}
	}
	return b
}

var errStateSection = errors.New("core: malformed commit state section")

func decodeStateOps(b []byte) ([]StateOp, error) {
	if len(b) < 4 {
		return nil, errStateSection
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b))/3 {
		return nil, errStateSection
	}
	ops := make([]StateOp, 0, n)
	for range n {
		if len(b) < 3 {
			return nil, errStateSection
		}
		kind, kl := b[0], int(binary.BigEndian.Uint16(b[1:]))
		b = b[3:]
		if len(b) < kl || (kind != stateOpPut && kind != stateOpDelete) {
			return nil, errStateSection
		}
		op := StateOp{Key: string(b[:kl]), Delete: kind == stateOpDelete}
		b = b[kl:]
		if !op.Delete {
			if len(b) < 4 || uint64(len(b)-4) < uint64(binary.BigEndian.Uint32(b)) {
				return nil, errStateSection
			}
			vl := binary.BigEndian.Uint32(b)
			op.Value = append([]byte{}, b[4:4+vl]...)
			b = b[4+vl:]
		}
		ops = append(ops, op)
	}
	if len(b) != 0 {
		return nil, errStateSection
	}
	return ops, nil
}

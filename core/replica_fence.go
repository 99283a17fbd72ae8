package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/felixmq/felix/internal/atomicfile"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// A replica's fence is the highest leadership generation it has promised
// to: once a new leader at generation g has fenced it, it refuses the
// records of any leader of an older generation, across restarts. It is
// kept in the shard's directory, beside the log's segments, in a file of
// its own: 8 bytes of generation and a CRC-32C of them, written to a
// temporary file, fsynced and renamed over the old one.

const fenceFile = "fence"

var fenceTable = crc32.MakeTable(crc32.Castagnoli)

// readFence returns the fence kept in dir (0 when there is none). A
// damaged file is an error: a replica that cannot tell whom it promised
// must not take records.
func readFence(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, fenceFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 12 || crc32.Checksum(b[:8], fenceTable) != binary.BigEndian.Uint32(b[8:]) {
		return 0, fmt.Errorf("fence file %s is damaged", filepath.Join(dir, fenceFile))
	}
	return binary.BigEndian.Uint64(b), nil
}

// writeFence durably replaces the fence kept in dir with g.
func writeFence(dir string, g uint64) error {
	b := binary.BigEndian.AppendUint64(nil, g)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, fenceTable))
	return atomicfile.Write(filepath.Join(dir, fenceFile), b, 0o600)
}

// Fenced returns the generation the replica has promised to.
func (r *Replica) Fenced() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fenced
}

// Fence promises the replica to generation g: from now on, and after a
// restart, it refuses records from a leader of an older generation. A
// fence at an older generation than the one held is refused with
// stale_generation. It returns the replica's tail: where its copy ends
// and the generation of its last record (0 for an empty copy).
func (r *Replica) Fence(g uint64) (next, lastGeneration uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g < r.fenced {
		return 0, 0, errStaleGeneration(r, g)
	}
	if g > r.fenced {
		if err := writeFence(r.dir, g); err != nil {
			return 0, 0, fmt.Errorf("replica of shard %d of %s: fence at %d: %w", r.index, r.st.key.Stream, g, err)
		}
		r.fenced = g
		r.signalGrownLocked() // a waiting shipment of an older leader is refused now
	}
	next = r.log.NextOffset()
	lastGeneration, err = r.generationAt(next)
	return next, lastGeneration, err
}

// generationAt returns the generation of the record before off (0 when
// off is the log's start).
func (r *Replica) generationAt(off uint64) (uint64, error) { return generationBefore(r.log, off) }

// generationBefore returns the generation of lg's record at off-1: 0 at
// the start of the log, or below what retention kept.
func generationBefore(lg *flog.Log, off uint64) (uint64, error) {
	if off == 0 || off <= lg.StartOffset() {
		return 0, nil
	}
	rec, err := lg.ReadRecord(off - 1)
	if err != nil {
		return 0, err
	}
	return rec.Generation, nil
}

// GenerationBefore returns the generation of the record at off-1 in the
// replica's copy (0 at its start); an offset past the copy is an error.
func (r *Replica) GenerationBefore(off uint64) (uint64, error) {
	return r.generationAt(off)
}

// TruncateTo removes the replica's records from off on: a copy that
// diverged from its leader's log is cut back to their common prefix. The
// records removed were never committed (a majority held none of them).
func (r *Replica) TruncateTo(off uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastAt = 0
	if err := r.cutPromise(off); err != nil {
		return err
	}
	r.signalGrownLocked()
	return r.log.TruncateTo(off)
}

// Read returns records of the replica's copy in [from, end): a new
// leader fetching what its own copy lacks.
func (r *Replica) Read(from, end uint64, maxRecords, maxBytes int) ([]flog.Record, uint64, error) {
	return r.log.Read(from, end, maxRecords, maxBytes)
}

func errStaleGeneration(r *Replica, g uint64) *wire.Error {
	return wire.NewError(wire.CodeShardUnavailable, "replica of shard %d of %s is fenced at generation %d; %d is stale", r.index, r.st.key.Stream, r.fenced, g).
		WithDetail(wire.DetailReason, "stale_generation").WithDetail("generation", r.fenced)
}

// EndOfGeneration returns the first offset of the replica's copy holding
// a record of a generation above g, or NextOffset when none does: where a
// copy whose last record is of generation g stops agreeing with this one
// (generations never decrease along a log). A new leader asks its source
// this to find the common prefix of its own copy.
func (r *Replica) EndOfGeneration(g uint64) (uint64, error) {
	return endOfGeneration(r.log, g)
}

// endOfGeneration is EndOfGeneration over any log: a binary search with
// point reads.
func endOfGeneration(lg *flog.Log, g uint64) (uint64, error) {
	lo, hi := lg.StartOffset(), lg.NextOffset()
	for lo < hi {
		mid := lo + (hi-lo)/2
		rec, err := lg.ReadRecord(mid)
		if err != nil {
			return 0, err
		}
		if rec.Generation > g {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// EndOfGeneration is Replica.EndOfGeneration on a leader's log.
func (sh *Shard) EndOfGeneration(g uint64) (uint64, error) {
	if sh.log == nil {
		return 0, errNotDurable(sh)
	}
	return endOfGeneration(sh.log, g)
}

// GenerationBefore returns the generation of the leader's record at
// off-1 (0 at the start of the log, or below what retention kept).
func (sh *Shard) GenerationBefore(off uint64) (uint64, error) {
	if sh.log == nil {
		return 0, errNotDurable(sh)
	}
	return generationBefore(sh.log, off)
}

// startGeneration appends a generation-start record to a shard a new
// leader opens over an earlier leadership's records, before the shard is
// visible, and holds reads until a majority holds it (Stream.openAs). A
// failed append leaves the shard unavailable.
func (sh *Shard) startGeneration(g uint64) {
	app, err := sh.log.AppendEntries([]flog.Entry{{Kind: flog.KindGenerationStart, Generation: g}}, "", nowMicrosCore())
	if err != nil {
		sh.unavailable = fmt.Errorf("writing the generation-start record: %w", err)
		return
	}
	sh.log.SyncSoon()
	sh.next = sh.log.NextOffset()
	sh.nextPub.Store(sh.next)
	sh.readHold = app.Base + 1
	sh.holdSkipped = 1 + eventlessBefore(sh.log, app.Base)
}

// maxEventlessRun bounds how far eventlessBefore looks back.
const maxEventlessRun = 1024

// eventlessBefore counts the records just before off that are not
// events (generation starts of earlier leaders that published nothing),
// up to maxEventlessRun; a record that cannot be read ends the count.
func eventlessBefore(lg *flog.Log, off uint64) uint64 {
	var n uint64
	for off > lg.StartOffset() && n < maxEventlessRun {
		rec, err := lg.ReadRecord(off - 1)
		if err != nil || rec.Kind == flog.KindData {
			break
		}
		n++
		off--
	}
	return n
}

// readsHeld refuses a read while a new leader's generation start is not
// yet held by a majority (nil once it is, or on any other shard).
func (sh *Shard) readsHeld() error {
	if sh.readHold == 0 || sh.repl == nil || sh.repl.Committed() >= sh.readHold {
		return nil
	}
	k := sh.stream.key
	return wire.NewError(wire.CodeShardUnavailable, "shard %d of stream %s/%s/%s has a new leader whose generation start no majority holds yet",
		sh.index, k.Tenant, k.Namespace, k.Stream).WithDetail(wire.DetailReason, ReasonNotReady).WithDetail("shard", sh.index)
}

func nowMicrosCore() uint64 { return uint64(max(0, time.Now().UnixMicro())) }

// OpenStreamShardAsNewLeader is OpenStreamShard for a leader that took
// the shard over from an earlier one (after fencing and catching up its
// copy): see Stream.openAs.
func (b *Broker) OpenStreamShardAsNewLeader(k StreamKey, shard uint32, generation uint64) error {
	st, ok := b.Stream(k)
	if !ok {
		return wire.NewError(wire.CodeNotFound, "stream %s/%s/%s is not known to this broker", k.Tenant, k.Namespace, k.Stream)
	}
	if int(shard) >= len(st.shards) {
		return wire.CheckShard("stream", st.key.Stream, shard, uint32(len(st.shards)))
	}
	return st.openAs(shard, generation, true)
}

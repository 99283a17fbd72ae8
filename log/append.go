package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"syscall"
	"time"
)

// Appended identifies the records of one Append, for Wait.
type Appended struct {
	Base       uint64 // offset of the first record
	Count      uint32
	TimeMicros uint64 // the records' time (AppendRecords: the first record's), µs since the Unix epoch
	end        uint64 // Base + Count
	cuts       uint64 // Log.cuts when written, to tell whether a TruncateTo removed them
}

// Entry is one record for AppendEntries.
type Entry struct {
	Kind       Kind
	Generation uint64
	Payload    []byte
}

// Append writes one record per payload at the next offsets, all of
// KindData and of the log's generation (SetGeneration; 0 until set), with the current time and the given publisher
// (may be ""). It returns once the bytes are handed to the OS; Wait makes
// them durable under the policy. Concurrent appends are serialized; offsets
// follow the order of return. On a write error nothing is consumed: the
// partial bytes are cut away and the error matches ErrNoSpace (and
// syscall.ENOSPC) when the disk is full.
func (l *Log) Append(payloads [][]byte, publisher string) (Appended, error) {
	return l.AppendAt(payloads, publisher, nowMicros(l.opts.Now()))
}

// SetGeneration sets the generation Append, AppendAt and AppendProduced
// stamp on the records they write from now on: a shard's leader writes its
// leadership generation into every record, so that copies of the log can
// later be compared by generation. Records written before keep theirs.
func (l *Log) SetGeneration(g uint64) {
	l.mu.Lock()
	l.generation = g
	l.mu.Unlock()
}

// AppendAt is Append with an explicit record time in µs.
func (l *Log) AppendAt(payloads [][]byte, publisher string, timeMicros uint64) (Appended, error) {
	return l.appendBatch(&batch{payloads: payloads, publisher: publisher, time: timeMicros})
}

// AppendProduced is Append for an idempotent producer's batch: its first
// record carries producer (layout version 2), the rest are written as
// Append writes them. producer.Count is set to the batch's length.
func (l *Log) AppendProduced(payloads [][]byte, publisher string, producer Producer) (Appended, error) {
	producer.Count = uint32(len(payloads))
	return l.appendBatch(&batch{payloads: payloads, publisher: publisher, time: nowMicros(l.opts.Now()), producer: &producer})
}

// AppendCommit writes one KindData record whose payload is event and whose
// state section (layout version 3) is state: an atomic commit's event and
// state operations as one record, so no reader of the log can find one
// without the other. state must not be nil; the log interprets none of it.
func (l *Log) AppendCommit(event []byte, publisher string, state []byte) (Appended, error) {
	if state == nil {
		state = []byte{}
	}
	return l.appendBatch(&batch{payloads: [][]byte{event}, publisher: publisher, time: nowMicros(l.opts.Now()), state: state})
}

// AppendEntries is AppendAt for records of any kind and generation.
func (l *Log) AppendEntries(entries []Entry, publisher string, timeMicros uint64) (Appended, error) {
	return l.appendBatch(&batch{entries: entries, publisher: publisher, time: timeMicros})
}

// AppendRecords writes records at the offsets they carry, with their own
// time, publisher, kind and generation: a follower copying the records its
// leader assigned. The first record must be at NextOffset and the rest
// contiguous; otherwise nothing is written and the error is an
// *OffsetError (matching ErrOffsetMismatch) that names the next offset. A
// follower whose log is ahead of its leader's truncates first (TruncateTo).
// Records are written in the current layout whatever their Version field
// says. Failures are those of Append.
func (l *Log) AppendRecords(recs []Record) (Appended, error) {
	for i := 1; i < len(recs); i++ {
		if recs[i].Offset != recs[0].Offset+uint64(i) {
			return Appended{}, &OffsetError{Index: i, Got: recs[i].Offset, Want: recs[0].Offset + uint64(i), Next: l.NextOffset()}
		}
	}
	t := uint64(0)
	if len(recs) > 0 {
		t = recs[0].TimeMicros
	}
	return l.appendBatch(&batch{recs: recs, time: t})
}

// batch is what one append call writes: exactly one of payloads, entries
// or recs is used.
type batch struct {
	payloads  [][]byte // KindData, generation 0
	entries   []Entry
	recs      []Record  // offsets given (AppendRecords)
	publisher string    // for payloads and entries
	time      uint64    // for payloads and entries
	producer  *Producer // for payloads: the first record's producer block
	state     []byte    // for payloads: the first record's state section
	// generation is the payloads' records' generation: the log's
	// (SetGeneration) when the batch is written.
	generation uint64
}

func (b *batch) len() int { return len(b.payloads) + len(b.entries) + len(b.recs) }

// record returns the i-th record's metadata, at offset off, and payload.
func (b *batch) record(i int, off uint64) (recordMeta, []byte) {
	m := recordMeta{offset: off, time: b.time, publisher: b.publisher}
	switch {
	case b.recs != nil:
		r := &b.recs[i]
		m.kind, m.generation, m.time, m.publisher, m.producer, m.state = r.Kind, r.Generation, r.TimeMicros, r.Publisher, r.Producer, r.State
		return m, r.Payload
	case b.entries != nil:
		e := &b.entries[i]
		m.kind, m.generation = e.Kind, e.Generation
		return m, e.Payload
	}
	if i == 0 {
		m.producer, m.state = b.producer, b.state
	}
	m.generation = b.generation
	return m, b.payloads[i]
}

// appendBatch checks a batch's limits, rolls if needed and writes it.
func (l *Log) appendBatch(b *batch) (Appended, error) {
	size, err := batchSize(b)
	if err != nil {
		return Appended{}, err
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return Appended{}, fmt.Errorf("log: append: %w", err)
	}
	if b.payloads != nil {
		b.generation = l.generation
	}
	if len(b.recs) > 0 && b.recs[0].Offset != l.next {
		err := &OffsetError{Got: b.recs[0].Offset, Want: l.next, Next: l.next}
		l.mu.Unlock()
		return Appended{}, err
	}
	if b.len() == 0 {
		a := Appended{Base: l.next, TimeMicros: b.time, end: l.next, cuts: l.cuts}
		l.mu.Unlock()
		return a, nil
	}
	victims, err := l.maybeRollLocked(size)
	var a Appended
	if err == nil {
		a, err = l.writeLocked(b, size)
	}
	l.mu.Unlock()
	l.removeSegments(victims)
	return a, err
}

// nowMicros converts a time to µs since the epoch, clamping at 0.
func nowMicros(t time.Time) uint64 {
	return uint64(max(0, t.UnixMicro()))
}

// batchSize checks the limits and returns the encoded size of a batch.
func batchSize(b *batch) (int64, error) {
	n := b.len()
	if uint64(n) > math.MaxUint32 {
		return 0, fmt.Errorf("log: append: %d records: %w", n, ErrTooLarge)
	}
	var total int64
	for i := range n {
		m, p := b.record(i, 0)
		if len(m.publisher) > MaxPublisherBytes {
			return 0, fmt.Errorf("log: append: publisher of %d bytes: %w", len(m.publisher), ErrTooLarge)
		}
		if m.producer != nil && m.state != nil {
			return 0, fmt.Errorf("log: append: a record with both a producer block and a state section: %w", ErrTooLarge)
		}
		if uint64(len(m.state)) > math.MaxUint32 {
			return 0, fmt.Errorf("log: append: state section of %d bytes: %w", len(m.state), ErrTooLarge)
		}
		sz := recordSize(m, p)
		if sz > MaxRecordBytes {
			return 0, fmt.Errorf("log: append: record of %d bytes: %w", sz, ErrTooLarge)
		}
		total += int64(sz)
		if total > MaxBatchBytes {
			return 0, fmt.Errorf("log: append: batch over %d bytes: %w", MaxBatchBytes, ErrTooLarge)
		}
	}
	return total, nil
}

// maybeRollLocked seals the active segment when size more bytes would take
// it past SegmentBytes, and returns the segments retention now drops.
func (l *Log) maybeRollLocked(size int64) ([]*segment, error) {
	act := l.active()
	if act.size == 0 || act.size+size <= l.opts.SegmentBytes {
		return nil, nil
	}
	// The sealed segment is fsynced before its successor exists, so recovery
	// never finds a torn record outside the last segment.
	if err := l.writeBufferedLocked(); err != nil {
		return nil, fmt.Errorf("log: roll: %w", err)
	}
	if err := l.fsyncLocked(act); err != nil {
		return nil, fmt.Errorf("log: roll: %w", err)
	}
	l.releaseReserved(act)
	l.advanceSyncedLocked(act.next)
	next, err := l.createSegment(act.next)
	if err != nil {
		return nil, wrapWriteErr(err)
	}
	if err := writeIndexes(l.fs, act, act.offIdx, act.timeIdx); err != nil {
		l.opts.Logger.Warn("log: write index at seal", "segment", act.name(), "err", err)
	}
	l.segs = append(l.segs, next)
	return l.retentionVictimsLocked(), nil
}

// advanceSyncedLocked records that fsync covered everything below off.
func (l *Log) advanceSyncedLocked(off uint64) {
	if off <= l.synced {
		return
	}
	l.synced = off
	if l.opts.Fsync == FsyncAlways && l.failErr == nil {
		l.durable = max(l.durable, off)
	}
	l.broadcastLocked()
}

// writeLocked encodes and writes a batch to the active segment in one
// write. On error it cuts the partial bytes away; if that fails the log
// fails, because the file may now hold a record at an offset not consumed.
func (l *Log) writeLocked(b *batch, size int64) (Appended, error) {
	if l.buffering() {
		return l.bufferLocked(b, size)
	}
	return l.writeNowLocked(b)
}

// writeNowLocked is writeLocked writing the batch at once.
func (l *Log) writeNowLocked(b *batch) (Appended, error) {
	act := l.active()
	n := b.len()
	buf := l.encBuf[:0]
	for i := range n {
		m, p := b.record(i, l.next+uint64(i))
		buf = appendRecord(buf, m, p)
	}
	if cap(buf) <= 4<<20 {
		l.encBuf = buf
	}
	l.stats.Writes++
	w, err := act.f.Write(buf)
	if err == nil && w != len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if w > 0 {
			if terr := act.f.Truncate(act.size); terr != nil {
				return Appended{}, fmt.Errorf("log: append: %w (rollback: %w)", wrapWriteErr(err),
					l.failLocked(fmt.Errorf("truncate %s after failed write: %w", act.name(), terr)))
			}
		}
		return Appended{}, wrapWriteErr(err)
	}
	a := Appended{Base: l.next, Count: uint32(n), TimeMicros: b.time, cuts: l.cuts}
	pos := act.size
	for i := range n {
		m, p := b.record(i, l.next)
		sz := int64(recordSize(m, p))
		act.noteRecord(pos, l.next, m.time, sz, l.opts.IndexIntervalBytes)
		pos += sz
		l.next++
	}
	a.end = l.next
	l.written = l.next
	if l.opts.Fsync != FsyncAlways {
		l.durable = l.next
	}
	l.stats.Appends++
	l.stats.Records += uint64(n)
	return a, nil
}

// buffering reports whether appends wait in buf for the flusher.
func (l *Log) buffering() bool { return l.opts.BufferAppends && l.opts.Fsync == FsyncAlways }

// bufferLocked is writeLocked for a log with BufferAppends: the batch is
// encoded onto buf, taking its offsets, and written with the records
// before it by the flusher's next fsync, or here once buf passes
// MaxBufferedBytes. Its size bytes are first reserved in the segment
// file (reserveLocked): a full disk refuses the batch here, consuming
// nothing; a file or system that reserves nothing writes it at once. While
// buffered records cannot be written for a full disk anyway, the batch is
// refused unless writing them succeeds now.
func (l *Log) bufferLocked(b *batch, size int64) (Appended, error) {
	if l.stalled != nil {
		if err := l.writeBufferedLocked(); err != nil {
			return Appended{}, err
		}
	}
	act := l.active()
	if ok, err := l.reserveLocked(act, act.size+size); err != nil {
		return Appended{}, err
	} else if !ok {
		if err := l.writeBufferedLocked(); err != nil {
			return Appended{}, err
		}
		return l.writeNowLocked(b)
	}
	n := b.len()
	a := Appended{Base: l.next, Count: uint32(n), TimeMicros: b.time, cuts: l.cuts}
	pos := act.size
	for i := range n {
		m, p := b.record(i, l.next)
		start := len(l.buf)
		l.buf = appendRecord(l.buf, m, p)
		act.noteRecord(pos, l.next, m.time, int64(len(l.buf)-start), l.opts.IndexIntervalBytes)
		pos = act.size
		l.next++
	}
	a.end = l.next
	l.stats.Appends++
	l.stats.Records += uint64(n)
	if len(l.buf) >= MaxBufferedBytes {
		// Taken either way: a full disk stalls them, a failure fails the log.
		_ = l.writeBufferedLocked()
	}
	return a, nil
}

// reserveChunk is how much segment file a buffering log reserves at a
// time.
const reserveChunk = 1 << 20

// reserveLocked makes sure the disk space of act's file up to end is
// reserved (ok), reserving the next chunks if needed. A full disk is the
// error (matching ErrNoSpace). ok is false, with no error, when the file
// cannot reserve space (not an Allocator, or the system declines), and
// the log stops trying.
func (l *Log) reserveLocked(act *segment, end int64) (ok bool, err error) {
	if end <= act.reserved {
		return true, nil
	}
	al, can := act.f.(Allocator)
	if !can || l.noReserve {
		l.noReserve = true
		return false, nil
	}
	upTo := (end + reserveChunk - 1) / reserveChunk * reserveChunk
	if err := al.Allocate(act.reserved, upTo-act.reserved); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return false, wrapWriteErr(err)
		}
		l.opts.Logger.Info("log: cannot reserve segment space; appends are written at once", "dir", l.opts.Dir, "err", err)
		l.noReserve = true
		return false, nil
	}
	act.reserved = upTo
	return true, nil
}

// releaseReserved gives back the space reserved past s's records (the
// segment is sealed or closing); a failure only costs disk space.
func (l *Log) releaseReserved(s *segment) {
	if s.reserved <= s.size {
		return
	}
	if err := s.f.Truncate(s.size); err != nil {
		l.opts.Logger.Warn("log: release reserved space", "segment", s.name(), "err", err)
		return
	}
	s.reserved = 0
}

// writeBufferedLocked writes buf to the active segment in one write. A
// full disk cuts the partial bytes away and stalls the log: the records
// stay in buf, later appends are refused until a write of them succeeds,
// and their Waits wait. Any other error (or a failed cut) fails the log,
// since the records' offsets are taken and their owner may have acted on
// them: they are lost, and were never durable.
func (l *Log) writeBufferedLocked() error {
	if len(l.buf) == 0 {
		return nil
	}
	act := l.active()
	inFile := act.size - int64(len(l.buf))
	l.stats.Writes++
	w, err := act.f.Write(l.buf)
	if err == nil && w != len(l.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if w > 0 {
			if terr := act.f.Truncate(inFile); terr != nil {
				return l.failLocked(fmt.Errorf("truncate %s after failed write: %w", act.name(), terr))
			}
		}
		if errors.Is(err, syscall.ENOSPC) {
			l.stalled = wrapWriteErr(err)
			return l.stalled
		}
		return l.failLocked(fmt.Errorf("write %s: %w", act.name(), err))
	}
	l.written, l.stalled = l.next, nil
	if cap(l.buf) > 4*MaxBufferedBytes {
		l.buf = nil
	} else {
		l.buf = l.buf[:0]
	}
	return nil
}

// wrapWriteErr makes a disk-full error match ErrNoSpace as well.
func wrapWriteErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: append: %w", ErrNoSpace, err)
	}
	return fmt.Errorf("log: append: %w", err)
}

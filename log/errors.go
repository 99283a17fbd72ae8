package log

import (
	"errors"
	"fmt"
)

var (
	// ErrNoSpace marks an append refused because the disk is full. No offsets
	// were consumed; a later append may succeed once space returns.
	ErrNoSpace = errors.New("log: no space left on device")
	// ErrFailed marks a log that can no longer promise durability (an fsync
	// or a rollback truncate failed). Every later Append and Wait fails.
	ErrFailed = errors.New("log: failed")
	// ErrClosed is returned by operations on a closed log.
	ErrClosed = errors.New("log: closed")
	// ErrTooLarge is returned for a record, publisher or batch over its limit.
	ErrTooLarge = errors.New("log: too large")
	// ErrOffsetMismatch is matched by every *OffsetError.
	ErrOffsetMismatch = errors.New("log: offset mismatch")
	// ErrTruncated is returned by Wait for an append whose records a
	// TruncateTo removed before they became durable.
	ErrTruncated = errors.New("log: records truncated")
)

// OffsetError refuses an AppendRecords whose records do not start at the
// log's next offset or are not contiguous. Nothing was written.
type OffsetError struct {
	// Index is the position in the batch of the first misplaced record.
	Index int
	// Got is that record's offset; Want the offset it needed.
	Got, Want uint64
	// Next is the log's next offset when the append was refused.
	Next uint64
}

func (e *OffsetError) Error() string {
	return fmt.Sprintf("log: append records: record %d has offset %d, want %d (the log's next offset is %d)",
		e.Index, e.Got, e.Want, e.Next)
}

// Is makes every OffsetError match ErrOffsetMismatch.
func (e *OffsetError) Is(target error) bool { return target == ErrOffsetMismatch }

// RangeError refuses a TruncateTo outside [StartOffset, NextOffset].
// Nothing was changed.
type RangeError struct {
	Requested   uint64
	Start, Next uint64
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("log: truncate to %d: outside the retained offsets [%d, %d]", e.Requested, e.Start, e.Next)
}

// CorruptionError reports damage that recovery refuses to repair because it
// is not a torn tail: a bad record in a sealed segment, or a bad record that
// valid records follow.
type CorruptionError struct {
	// Segment is the segment file's base name.
	Segment string
	// Position is the byte position of the bad record in that file.
	Position int64
	// LastGoodOffset is the offset of the last record that verified before
	// the damage. When none did (HasLastGood false) it is the segment's base
	// offset minus one, wrapping for base 0.
	LastGoodOffset uint64
	// HasLastGood says whether any record verified before the damage.
	HasLastGood bool
	// Reason names the check that failed: "crc mismatch", "bad length",
	// "partial record", "offset out of sequence", "bad publisher length",
	// "segment base out of sequence", "unknown record version" (a record
	// a newer build wrote; never cut as a torn tail).
	Reason string
}

func (e *CorruptionError) Error() string {
	if !e.HasLastGood {
		return fmt.Sprintf("segment %s position %d: %s (no good record before it)", e.Segment, e.Position, e.Reason)
	}
	return fmt.Sprintf("segment %s position %d: %s (last good offset %d)", e.Segment, e.Position, e.Reason, e.LastGoodOffset)
}

// CursorError is returned by Read for an offset outside the retained range.
type CursorError struct {
	// TooOld is true when Requested is below the oldest retained offset and
	// false when it is beyond the next offset.
	TooOld bool
	// Requested is the offset asked for.
	Requested uint64
	// Available is the oldest retained offset (TooOld) or the next offset.
	Available uint64
}

func (e *CursorError) Error() string {
	if e.TooOld {
		return fmt.Sprintf("log: offset %d is too old (oldest retained %d)", e.Requested, e.Available)
	}
	return fmt.Sprintf("log: offset %d is in the future (next offset %d)", e.Requested, e.Available)
}

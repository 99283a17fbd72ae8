package core

import (
	"context"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// Atomic commits (docs/atomic-commit.md): one event and the state changes
// it carries, written as ONE record on a durable shard (log layout
// version 3: the event is the payload, the state operations a section
// beside it). Readers of the log see the event as an ordinary record;
// the state is applied to the shard's commit state under the same claim
// lock, versioned by the record's offset, and StateGet sees it once the
// record is readable.

// ReasonCommitStateFull is the overloaded reason of a commit refused by
// the state bound.
const ReasonCommitStateFull = "commit_state_full"

// ClaimCommit is Claim for an atomic commit: event and ops as one record,
// conditional on the shard's next offset being *expected when expected is
// set (as ClaimIf). Refusals write nothing and take no offset: an
// in-memory stream (invalid_request, reason not_durable), an empty or
// oversized key (invalid_request), the state bound (overloaded, reason
// commit_state_full), an offset_mismatch, and Claim's.
func (sh *Shard) ClaimCommit(event []byte, ops []StateOp, publisher string, expected *uint64) (*Claimed, error) {
	if err := checkStateOps(ops); err != nil {
		return nil, err
	}
	state := encodeStateOps(ops)
	sh.claimMu.Lock()
	defer sh.claimMu.Unlock()
	if sh.log == nil && sh.unavailable == nil && !sh.closed.Load() {
		return nil, wire.NewError(wire.CodeInvalidRequest, "stream %s is not durable: an atomic commit needs a log", sh.stream.key.Stream).
			WithDetail("reason", "not_durable")
	}
	if err := sh.claimableLocked([][]byte{event}, expected); err != nil {
		return nil, err
	}
	cs := sh.commitState()
	if need, held, ok := cs.room(ops); !ok {
		sh.metrics().commitState.refused.Inc()
		return nil, wire.NewError(wire.CodeOverloaded, "shard %d of %s holds %d bytes of commit state; %d more would pass FELIX_COMMIT_STATE_MAX_BYTES (%d)",
			sh.index, sh.stream.key.Stream, held, need, cs.limit).
			WithDetail("reason", ReasonCommitStateFull).WithDetail("limit", cs.limit).WithDetail("shard", sh.index)
	}
	c, err := sh.appendClaimLocked([][]byte{event}, publisher, nil, state)
	if err != nil {
		return nil, err
	}
	cs.apply(ops, c.env.BaseOffset, &sh.nextPub)
	return c, nil
}

// Commit claims a commit and finishes it, returning its offset.
func (sh *Shard) Commit(ctx context.Context, event []byte, ops []StateOp, publisher string, expected *uint64) (uint64, error) {
	c, err := sh.ClaimCommit(event, ops, publisher, expected)
	if err != nil {
		return 0, err
	}
	return c.BaseOffset(), c.Finish(ctx)
}

// StateGet returns key's value in the shard's commit state and its
// version (the offset of the commit that wrote it); found is false for a
// key never written or deleted. It sees a commit once its record is
// readable (on a Quorum shard, once a majority holds it).
func (sh *Shard) StateGet(key string) (value []byte, version uint64, found bool, err error) {
	if sh.unavailable != nil {
		return nil, 0, false, sh.errUnavailable(sh.unavailable)
	}
	if sh.log == nil {
		return nil, 0, false, errNotDurable(sh)
	}
	if err := sh.readsHeld(); err != nil {
		return nil, 0, false, err
	}
	e, ok := sh.commitState().get(key, &sh.nextPub)
	return e.value, e.version, ok, nil
}

// CommitStateBytes returns what the shard's commit state accounts.
func (sh *Shard) CommitStateBytes() int64 {
	if s := sh.commits.Load(); s != nil {
		return s.Bytes()
	}
	return 0
}

// commitState returns the shard's commit state, made on first use.
func (sh *Shard) commitState() *commitState {
	if s := sh.commits.Load(); s != nil {
		return s
	}
	s := newCommitState(sh.stream.cfg.CommitStateMaxBytes, &sh.metrics().commitState)
	if !sh.commits.CompareAndSwap(nil, s) {
		return sh.commits.Load()
	}
	return s
}

func checkStateOps(ops []StateOp) error {
	for i, op := range ops {
		if op.Key == "" {
			return wire.NewError(wire.CodeInvalidRequest, "commit: state operation %d has an empty key", i)
		}
		if len(op.Key) > MaxStateKeyBytes {
			return wire.NewError(wire.CodeInvalidRequest, "commit: state operation %d has a key of %d bytes (at most %d)", i, len(op.Key), MaxStateKeyBytes)
		}
	}
	return nil
}

// rebuildCommitState applies the commit records of the segments rep says
// hold any (layout version 3), oldest first, before the shard is
// visible. Open has read every record already; a shard that never took a
// commit reads nothing more. A record whose section does not decode is
// skipped and logged: its event stays readable.
func (sh *Shard) rebuildCommitState(rep *flog.Report, c *StorageConfig) {
	if rep == nil {
		return
	}
	lg := sh.log
	next := lg.NextOffset()
	for i, seg := range rep.Segments {
		if seg.Versions[flog.RecordVersionState] == 0 {
			continue
		}
		from, end := max(seg.BaseOffset, lg.StartOffset()), next
		if i+1 < len(rep.Segments) {
			end = min(end, rep.Segments[i+1].BaseOffset)
		}
		for from < end {
			recs, n, err := lg.Read(from, end, 4096, 4<<20)
			if err != nil || n <= from {
				c.logger().Error("commit state: reading the log to rebuild it failed; state after this point is missing",
					"stream", sh.stream.key.Stream, "shard", sh.index, "offset", from, "err", err)
				return
			}
			for _, r := range recs {
				if r.State == nil {
					continue
				}
				ops, err := decodeStateOps(r.State)
				if err != nil {
					c.logger().Error("commit state: a commit record's state section does not decode; skipped",
						"stream", sh.stream.key.Stream, "shard", sh.index, "offset", r.Offset, "err", err)
					continue
				}
				sh.commitState().apply(ops, r.Offset, &sh.nextPub)
				sh.metrics().commitState.rebuilt.Inc()
			}
			from = n
		}
	}
}

package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// Claimed is a durable publish whose records have been handed to the log
// and whose offsets are taken, but which has not been delivered yet.
type Claimed struct {
	sh  *Shard
	env *Envelope
	app flog.Appended
	// prev is the claim before this one (nil for a shard's first claim,
	// and once this one no longer needs it); done is closed when this one
	// has finished. Each claim waits for its predecessor alone, so
	// finishing N outstanding claims wakes N goroutines, not N per
	// finished claim. Finish drops prev once it has waited for it: the
	// claims link back to the shard's first, and a chain kept whole
	// would hold every batch published since (payloads and frames) for
	// as long as the shard lives.
	prev *Claimed
	done chan struct{}
	// abandoned is set, before done is closed, when Finish gave up before
	// the claim's turn (its context ended): the shard's completed tail
	// then never passes it, so every later claim is abandoned too.
	abandoned atomic.Bool
	// outcome, set on an idempotent batch's claim, is what a re-send of
	// it waits on; the producer table holds it rather than the claim, so
	// it does not keep the batch's payloads alive.
	outcome *claimOutcome

	// dup marks an idempotent re-send the shard already held: nothing was
	// written, dupBase is where the first copy landed, and dupOf is the
	// first copy's outcome (nil when it was rebuilt from the log).
	dup     bool
	dupBase uint64
	dupOf   *claimOutcome
	// dupEnd, for a duplicate rebuilt from the log (written before a
	// restart or under an earlier leadership), is one past the first
	// copy's last record, or past this leadership's generation start when
	// that is later: a replicated shard answers the re-send only once a
	// majority holds it, as it serves reads. 0 for any other claim.
	dupEnd uint64
}

// claimOutcome is how a claim finished: err is set before done is closed.
type claimOutcome struct {
	done chan struct{}
	err  error
}

// BaseOffset returns the offset of the batch's first record (for a
// duplicate, the first copy's).
func (c *Claimed) BaseOffset() uint64 {
	if c.dup {
		return c.dupBase
	}
	return c.env.BaseOffset
}

// Duplicate reports whether the claim is an idempotent re-send answered
// from the producer table rather than written (ClaimIdempotent).
func (c *Claimed) Duplicate() bool { return c.dup }

// Claim is the ordered half of a durable publish: it writes the batch to
// the shard's log, which assigns its offsets. Claims on one shard are
// serialized, and land in the order they are made (the broker's publish
// lane makes them in publish order). The caller then calls Finish on each
// claim, from any goroutine. Claims that fail take no offsets, so a
// refusal leaves no gap: a full disk is overloaded (reason storage_full),
// a log that failed or did not recover is shard_unavailable.
func (sh *Shard) Claim(payloads [][]byte, publisher string) (*Claimed, error) {
	return sh.claimDurable(payloads, publisher, nil)
}

// ClaimIf is Claim for a conditional publish: the batch is written only if
// it would start at expected, the shard's next offset. The check and the
// append happen under the lock every claim on the shard takes, so of
// claims racing at one offset exactly one is written. When the shard's
// next offset is not expected, nothing is written, no offset is taken,
// and the error is wire.NewOffsetMismatch naming the next offset (the
// tail). The other refusals are Claim's, checked first.
func (sh *Shard) ClaimIf(payloads [][]byte, publisher string, expected uint64) (*Claimed, error) {
	return sh.claimDurable(payloads, publisher, &expected)
}

// claimDurable is Claim, conditional on the next offset when expected is set.
func (sh *Shard) claimDurable(payloads [][]byte, publisher string, expected *uint64) (*Claimed, error) {
	sh.claimMu.Lock()
	defer sh.claimMu.Unlock()
	if err := sh.claimableLocked(payloads, expected); err != nil {
		return nil, err
	}
	return sh.appendClaimLocked(payloads, publisher, nil, nil)
}

// claimableLocked checks that a claim of payloads may be made now (and,
// with expected set, that the shard's next offset is expected). Caller
// holds claimMu.
func (sh *Shard) claimableLocked(payloads [][]byte, expected *uint64) error {
	if len(payloads) == 0 {
		return errEmptyBatch()
	}
	if sh.closed.Load() {
		return sh.errClosed()
	}
	if sh.unavailable != nil {
		return sh.errUnavailable(sh.unavailable)
	}
	if sh.log == nil {
		if expected != nil {
			return wire.NewError(wire.CodeInvalidRequest, "stream %s is not durable: a conditional publish needs the offsets of a log", sh.stream.key.Stream).
				WithDetail("reason", "not_durable")
		}
		return wire.NewError(wire.CodeInternal, "shard %d of %s is not durable", sh.index, sh.stream.key.Stream)
	}
	if last := sh.lastClaim; last != nil && last.abandoned.Load() {
		return sh.errAbandoned(last.env.BaseOffset, last.env.EndOffset(), errors.New("an earlier batch was abandoned"))
	}
	if expected != nil {
		// Only claims append to the shard's log, all under claimMu, so
		// the log's next offset is the shard's next offset here.
		if tail := sh.log.NextOffset(); tail != *expected {
			return wire.NewOffsetMismatch(*expected, tail).WithDetail("shard", sh.index)
		}
	}
	return nil
}

// appendClaimLocked appends payloads to the log (the first record with
// producer's block when set; one record with state as its state section
// when state is set, an atomic commit) and links the claim. Caller holds claimMu
// and has checked claimableLocked.
func (sh *Shard) appendClaimLocked(payloads [][]byte, publisher string, producer *flog.Producer, state []byte) (*Claimed, error) {
	if !sh.stream.cfg.Storage.RecordPublishers {
		publisher = ""
	}
	var app flog.Appended
	var err error
	switch {
	case state != nil:
		app, err = sh.log.AppendCommit(payloads[0], publisher, state)
	case producer != nil:
		app, err = sh.log.AppendProduced(payloads, publisher, *producer)
	default:
		app, err = sh.log.Append(payloads, publisher)
	}
	if err != nil {
		return nil, sh.appendError(err)
	}
	env := sh.envelope(payloads, app.Base, publisher, time.UnixMicro(int64(app.TimeMicros)))
	if sh.readHold != 0 && app.Base == sh.readHold {
		// The first batch after a new leader's generation start: its
		// subscribers learn of the offsets that hold no event, as a
		// replay from the log tells them (RecordEnvelopes): a subscriber
		// whose replay ended on those offsets learns of them here only.
		env.SkippedBefore = sh.holdSkipped
	}
	c := &Claimed{sh: sh, env: env, app: app, prev: sh.lastClaim, done: make(chan struct{})}
	sh.lastClaim = c
	if sh.repl != nil {
		sh.repl.Appended(env.EndOffset())
	}
	return c, nil
}

// Durable reports whether the log already holds the claim as its fsync
// policy promises, so that Finish will not wait for the disk.
func (c *Claimed) Durable() bool {
	if c.dup {
		if c.dupOf == nil {
			r := c.sh.repl
			return r == nil || r.Committed() >= c.dupEnd
		}
		select {
		case <-c.dupOf.done:
			return true
		default:
			return false
		}
	}
	end := c.env.EndOffset()
	if r := c.sh.repl; r != nil && r.Committed() < end {
		return false
	}
	return c.sh.log.DurableOffset() >= end
}

// Finish completes a claim: it waits until the log holds the batch under
// its fsync policy, then for the batch's turn in offset order, and then
// appends it to the replay ring and fans it out, so delivery order is log
// order. It must be called for every claim, even when the publisher has
// gone: once claimed, the records exist. A batch the log could not make
// durable (an fsync failed) is not delivered and its error is returned.
//
// ctx bounds every wait: for the disk, for the claim before this one, for
// the turn, and a Block-policy wait for subscriber room (as in Publish).
// When it ends before the batch's turn (a hung fsync at shutdown), Finish
// gives up: the batch is not delivered, the error is draining with retry
// class outcome_unknown (the records may be in the log) and reason
// abandoned, and the shard delivers nothing after it: every later claim
// is abandoned too, and new ones are refused. So pass a context that ends
// only when the shard's durable publishing must stop (the broker's
// shutdown).
func (c *Claimed) Finish(ctx context.Context) error {
	return c.finish(ctx, ctx)
}

// finishDup is Finish for a duplicate: it waits for the first copy's
// claim, if it is still finishing, and returns its outcome.
func (c *Claimed) finishDup(ctx context.Context) error {
	if c.dupOf == nil {
		if r := c.sh.repl; r != nil && c.dupEnd > 0 {
			if err := r.WaitCommitted(ctx, c.dupEnd); err != nil {
				return c.sh.errAbandoned(c.dupBase, c.dupBase, err)
			}
		}
		return nil
	}
	select {
	case <-c.dupOf.done:
		return c.dupOf.err
	case <-ctx.Done():
		return c.sh.errAbandoned(c.dupBase, c.dupBase, ctx.Err())
	}
}

// finish is Finish with waitCtx bounding the waits for the disk, the
// predecessor and the turn, and ctx the Block-policy wait.
func (c *Claimed) finish(waitCtx, ctx context.Context) (err error) {
	if c.dup {
		return c.finishDup(waitCtx)
	}
	sh := c.sh
	defer func() {
		if c.outcome != nil {
			c.outcome.err = err
			close(c.outcome.done)
		}
		close(c.done)
	}()
	werr := sh.log.Wait(waitCtx, c.app)
	if cerr := waitCtx.Err(); werr != nil && cerr != nil && errors.Is(werr, cerr) {
		return c.abandon(cerr)
	}
	if r := sh.repl; r != nil && werr == nil {
		// A Quorum shard delivers and acknowledges a batch only once a
		// majority of its replicas holds it.
		if err := r.WaitCommitted(waitCtx, c.env.EndOffset()); err != nil {
			return c.abandon(err)
		}
	}
	if prev := c.prev; prev != nil {
		select {
		case <-prev.done:
		case <-waitCtx.Done():
			return c.abandon(waitCtx.Err())
		}
		c.prev = nil // see prev's doc: finish is its only reader
		if prev.abandoned.Load() {
			return c.abandon(errors.New("an earlier batch was abandoned"))
		}
	}
	if err := sh.acquireTurn(waitCtx); err != nil {
		return c.abandon(err)
	}
	defer sh.releaseTurn()
	if sh.next != c.env.BaseOffset {
		return wire.NewError(wire.CodeInternal, "offset %d of shard %d finished out of turn (completed tail %d)",
			c.env.BaseOffset, sh.index, sh.next)
	}
	sh.advance(c.env.EndOffset())
	if werr != nil {
		// The ring must stay contiguous: drop it rather than leave a hole.
		sh.ring.reset()
		return sh.errUnavailable(werr)
	}
	return sh.complete(ctx, c.env)
}

// abandon marks the claim given up before its turn and returns its error.
func (c *Claimed) abandon(cause error) error {
	c.abandoned.Store(true)
	return c.sh.errAbandoned(c.env.BaseOffset, c.env.EndOffset(), cause)
}

// errAbandoned is the refusal of offsets [base, end) of a batch whose
// wait was given up before it was delivered.
func (sh *Shard) errAbandoned(base, end uint64, cause error) *wire.Error {
	k := sh.stream.key
	e := wire.NewError(wire.CodeDraining, "shard %d of stream %s/%s/%s stopped waiting for offsets [%d, %d) to be written (%v); they were not delivered and may be in the log",
		sh.index, k.Tenant, k.Namespace, k.Stream, base, end, cause).
		WithDetail("reason", "abandoned").WithDetail("shard", sh.index)
	e.Retry = wire.RetryOutcomeUnknown
	return e
}

// publishDurable is Publish on a durable shard: claim, wait and deliver in
// one call, serialized on the shard so concurrent callers stay in order.
// The broker claims and finishes separately so that concurrent publishes
// share fsyncs.
func (sh *Shard) publishDurable(ctx context.Context, payloads [][]byte, publisher string) (uint64, error) {
	c, err := sh.Claim(payloads, publisher)
	if err != nil {
		return 0, err
	}
	// The caller's context bounds only the Block wait: a caller that
	// gives up must not abandon the shard's order.
	return c.BaseOffset(), c.finish(context.WithoutCancel(ctx), ctx)
}

// LaggedError ends a durable subscription whose queue had to drop a batch;
// ResumeFrom is the first offset dropped. Records already queued are
// delivered before it.
type LaggedError struct{ ResumeFrom uint64 }

func (e *LaggedError) Error() string {
	return fmt.Sprintf("subscriber fell behind; resume from offset %d", e.ResumeFrom)
}

// lag ends the subscriber at the first dropped batch.
func (s *Subscriber) lag(base uint64) {
	if s.q.end(&LaggedError{ResumeFrom: base}, false) {
		s.shard.metrics().durable.subsLagged.Inc()
	}
}

// subscribeDurable registers a subscriber on a durable shard. Under the
// commit turn it reads the completed tail, registers the subscriber with
// the part of [start, tail) the replay ring still holds, and leaves the
// older part, [start, ring start), for the consumer to read from the log
// (Subscriber.Replay). Registering before reading history closes the gap
// a publish landing in between would otherwise open.
func (sh *Shard) subscribeDurable(ctx context.Context, opts SubscribeOptions) (*Subscriber, error) {
	if sh.unavailable != nil {
		return nil, sh.errUnavailable(sh.unavailable)
	}
	if err := sh.readsHeld(); err != nil {
		return nil, err
	}
	if err := sh.acquireTurn(ctx); err != nil {
		return nil, err
	}
	defer sh.releaseTurn()
	live := sh.next
	oldest := min(sh.log.StartOffset(), live)
	var n uint64
	switch opts.Start.Kind {
	case wire.StartEarliest:
		n = oldest
	case wire.StartOffset:
		n = opts.Start.Offset
		if n > live {
			return nil, cursorError(false, n, live)
		}
		if n < oldest {
			return nil, cursorError(true, n, oldest)
		}
	default:
		n = live
	}
	ringStart := sh.ring.earliest(live)
	replayTo := n
	var backlog []*Envelope
	switch {
	case n >= live:
	case n >= ringStart:
		backlog = sh.ring.from(n)
	default:
		replayTo = ringStart
		if ringStart < live {
			backlog = sh.ring.from(ringStart)
		}
	}
	s := newSubscriber(sh, sh.capacityFor(opts.Capacity), sh.stream.cfg.SubQueueMaxBytes, opts.Notify)
	s.startOffset, s.liveOffset = n, live
	s.replayFrom, s.replayTo = n, replayTo
	s.endOnLag = opts.EndOnLag
	if len(backlog) > 0 {
		s.q.preload(backlog)
	}
	if !sh.register(s) {
		return nil, sh.errClosed()
	}
	return s, nil
}

// Replay returns the offsets [from, to) the subscriber must read from the
// log (with Shard.Read) before what its queue holds; from == to when the
// replay ring covered its start.
func (s *Subscriber) Replay() (from, to uint64) { return s.replayFrom, s.replayTo }

// Read returns committed records of a durable shard in [from, end), at
// most maxRecords of them and about maxBytes of payload (at least one
// record when any is in range), and the offset to continue from. A from
// retention removed, or past the committed tail, is a
// *wire.SubscribeCursorError.
func (sh *Shard) Read(from, end uint64, maxRecords, maxBytes int) ([]flog.Record, uint64, error) {
	if sh.unavailable != nil {
		return nil, from, sh.errUnavailable(sh.unavailable)
	}
	if sh.log == nil {
		return nil, from, errNotDurable(sh)
	}
	if err := sh.readsHeld(); err != nil {
		return nil, from, err
	}
	committed := sh.nextPub.Load()
	if from > committed {
		return nil, from, cursorError(false, from, committed)
	}
	end = min(end, committed)
	if from >= end {
		if from < sh.log.StartOffset() && from < committed {
			return nil, from, cursorError(true, from, sh.log.StartOffset())
		}
		return nil, from, nil
	}
	recs, next, err := sh.log.Read(from, end, maxRecords, maxBytes)
	var ce *flog.CursorError
	if errors.As(err, &ce) {
		if ce.TooOld {
			return nil, from, cursorError(true, from, ce.Available)
		}
		return nil, from, cursorError(false, from, min(ce.Available, committed))
	}
	if err != nil {
		return nil, from, sh.errUnavailable(err)
	}
	sh.metrics().durable.replayRecords.Add(len(recs))
	return recs, next, nil
}

// OffsetForTime returns the first committed offset appended at or after
// t (µs since the epoch); ok is false when nothing that recent is
// committed. A time older than every record gives the oldest one.
func (sh *Shard) OffsetForTime(t uint64) (offset uint64, ok bool, err error) {
	if sh.unavailable != nil {
		return 0, false, sh.errUnavailable(sh.unavailable)
	}
	if sh.log == nil {
		return 0, false, errNotDurable(sh)
	}
	if err := sh.readsHeld(); err != nil {
		return 0, false, err
	}
	off, ok, err := sh.log.OffsetForTime(t)
	if err != nil {
		return 0, false, sh.errUnavailable(err)
	}
	if !ok || off >= sh.nextPub.Load() {
		return 0, false, nil
	}
	return off, true, nil
}

// StartOffset returns the oldest offset a durable shard retains (the
// replay ring's oldest on an in-memory one).
func (sh *Shard) StartOffset() uint64 {
	if sh.log != nil {
		return min(sh.log.StartOffset(), sh.nextPub.Load())
	}
	return sh.nextPub.Load()
}

func errNotDurable(sh *Shard) *wire.Error {
	return wire.NewError(wire.CodeInvalidRequest, "stream %s is not durable: it keeps no log to read", sh.stream.key.Stream).
		WithDetail("reason", "not_durable")
}

// RecordEnvelopes groups log records into envelopes for delivery: runs of
// consecutive records with the same publisher share one envelope, which
// carries each record's own append time. Records that are not events (a
// new leader's generation start) are left out, and the envelope after
// them counts them in SkippedBefore.
func (sh *Shard) RecordEnvelopes(recs []flog.Record) []*Envelope {
	out, _ := sh.RecordEnvelopesAfter(recs, 0)
	return out
}

// RecordEnvelopesAfter is RecordEnvelopes for one page of a longer read:
// skipped is how many records the pages before it left out since their
// last event (counted into this page's first envelope), and trailing is
// how many this page left out after its last one (for the next page).
func (sh *Shard) RecordEnvelopesAfter(recs []flog.Record, skipped uint64) (out []*Envelope, trailing uint64) {
	for i := 0; i < len(recs); {
		if recs[i].Kind != flog.KindData {
			skipped++
			i++
			continue
		}
		j := i + 1
		for j < len(recs) && recs[j].Kind == flog.KindData && recs[j].Publisher == recs[i].Publisher && recs[j].Offset == recs[j-1].Offset+1 {
			j++
		}
		payloads := make([][]byte, j-i)
		times := make([]uint64, j-i)
		for k := i; k < j; k++ {
			payloads[k-i] = recs[k].Payload
			times[k-i] = recs[k].TimeMicros
		}
		e := sh.envelope(payloads, recs[i].Offset, recs[i].Publisher, time.UnixMicro(int64(times[0])))
		e.Times = times
		e.SkippedBefore, skipped = skipped, 0
		out = append(out, e)
		i = j
	}
	return out, skipped
}

package core

import (
	"errors"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// The operations of a consumer group (group.go has the state they keep).

// groupReadBytes bounds the payload bytes one log read of a poll asks
// for; a poll reads again until it has every record it claimed.
const groupReadBytes = 4 << 20

// Poll claims up to maxRecords records for group, each for vis (0: the
// default visibility; capped at the maximum), making the group at the
// shard's oldest record if it has no state. Owed records come first, in
// offset order, then new ones. Nothing available is an empty answer. A
// record past its attempts is dead-lettered instead of handed out.
func (g *Groups) Poll(group string, maxRecords int, vis time.Duration) ([]GroupRecord, error) {
	if maxRecords <= 0 {
		return nil, nil
	}
	g.mu.Lock()
	if g.file == nil {
		g.mu.Unlock()
		return nil, g.sh.errClosed()
	}
	st, err := g.state(group, true)
	var claims []claim
	if err == nil {
		claims, err = g.takeClaims(group, st, maxRecords, g.Visibility(vis))
	}
	g.mu.Unlock()
	if len(claims) == 0 {
		return nil, err
	}
	recs, gone, rerr := g.readClaims(claims)
	g.settle(group, st, claims, recs, gone)
	g.sh.metrics().groupDeliveries.Add(len(recs))
	if rerr != nil && len(recs) == 0 {
		return nil, rerr
	}
	return recs, nil
}

// readClaims reads the payloads of claims (in offset order). gone are
// the claimed offsets the log holds no record for (retention removed it)
// or whose record is not an event; both are finished, never delivered.
// Claims neither read nor gone (a read failed) are handed back by settle.
func (g *Groups) readClaims(claims []claim) (recs []GroupRecord, gone []uint64, err error) {
	for i := 0; i < len(claims); {
		j := i + 1
		for j < len(claims) && claims[j].offset == claims[j-1].offset+1 {
			j++
		}
		run := claims[i:j]
		from, end := run[0].offset, run[len(run)-1].offset+1
		k := 0
		for from < end {
			rs, next, rerr := g.sh.Read(from, end, int(end-from), groupReadBytes)
			if rerr != nil {
				var ce *wire.SubscribeCursorError
				if errors.As(rerr, &ce) {
					rerr = nil // retention moved the start; the next poll skips it
				}
				return recs, gone, rerr
			}
			for _, r := range rs {
				for k < len(run) && run[k].offset < r.Offset {
					gone = append(gone, run[k].offset)
					k++
				}
				if k == len(run) {
					break
				}
				if r.Kind != flog.KindData {
					gone = append(gone, r.Offset)
				} else {
					recs = append(recs, GroupRecord{Offset: r.Offset, Payload: r.Payload, Attempts: run[k].attempts,
						TimeMicros: r.TimeMicros, Publisher: r.Publisher})
				}
				k++
			}
			if next <= from {
				break
			}
			from = next
		}
		i = j
	}
	return recs, gone, nil
}

// settle finishes the gone claims of a poll and hands back the ones
// neither read nor gone.
func (g *Groups) settle(group string, st *groupState, claims []claim, recs []GroupRecord, gone []uint64) {
	if len(recs)+len(gone) == len(claims) && len(gone) == 0 {
		return
	}
	handled := make(map[uint64]bool, len(recs)+len(gone))
	for _, r := range recs {
		handled[r.Offset] = true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.groups[group] != st {
		return // deleted or moved meanwhile
	}
	for _, o := range gone {
		handled[o] = true
		if e := st.entries[o]; e != nil && e.state == entryClaimed {
			g.finish(st, o, e)
		}
	}
	for _, c := range claims {
		if e := st.entries[c.offset]; !handled[c.offset] && e != nil && e.state == entryClaimed && e.attempts == c.attempts {
			e.state, e.attempts, e.at = entryOwed, e.attempts-1, time.Time{}
		}
	}
	if err := g.advance(group, st); err != nil {
		g.sh.stream.cfg.Storage.logger().Warn("persisting a group cursor", "group", group, "err", err)
	}
}

// standing returns the group's state for a claim operation on offset; a
// group with no state has no claims (stale_claim), and an offset past the
// tail is no record.
func (g *Groups) standing(group string, offset uint64) (*groupState, error) {
	if g.file == nil {
		return nil, g.sh.errClosed()
	}
	st := g.loaded(group)
	if st == nil {
		return nil, errStaleClaim(group, offset, "the group has no state here")
	}
	if tail := g.sh.nextPub.Load(); offset >= tail {
		return nil, wire.NewError(wire.CodeInvalidRequest, "group %q: offset %d is past the shard's tail %d", group, offset, tail)
	}
	return st, nil
}

// Ack finishes offset for group. An offset already finished is a no-op;
// one never handed out by this state and written after it began is
// stale_claim.
func (g *Groups) Ack(group string, offset uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.standing(group, offset)
	if err != nil {
		return err
	}
	e := st.entries[offset]
	switch {
	case e != nil && e.state == entryDone:
		return nil
	case e == nil && offset < st.cursor:
		return nil
	case e == nil && offset >= st.next && offset >= st.graceEnd:
		g.sh.metrics().groupStaleClaims.Inc()
		return errStaleClaim(group, offset, "it was never handed out by this group's current state")
	case e == nil && offset < st.next:
		return nil
	}
	if _, ok := st.redriven[offset]; ok {
		o := offset
		if err := g.persist(groupOp{G: group, Done: &o}); err != nil {
			return err
		}
		delete(st.redriven, offset)
	}
	g.finish(st, offset, e)
	g.sh.metrics().groupAcks.Inc()
	g.notify() // the in-flight cap may have room again
	return g.advance(group, st)
}

// claimed returns the entry of a claim operation's offset, refusing an
// offset finished (invalid_request) or never handed out by this state
// (stale_claim). A nil entry with a nil error is an offset from before
// this state that it has not handed out yet.
func (g *Groups) claimed(group string, st *groupState, offset uint64, attempts *uint32) (*groupEntry, error) {
	e := st.entries[offset]
	switch {
	case e == nil && offset < st.cursor, e != nil && e.state == entryDone:
		return nil, errFinished(group, offset)
	case e == nil && offset >= st.next && offset < st.graceEnd:
		return nil, nil
	case e == nil:
		g.sh.metrics().groupStaleClaims.Inc()
		return nil, errStaleClaim(group, offset, "it was never handed out by this group's current state")
	}
	if attempts != nil && *attempts != e.attempts {
		g.sh.metrics().groupStaleClaims.Inc()
		return nil, errStaleClaim(group, offset, "delivery "+itoa(uint64(*attempts))+" is not the standing one, "+itoa(uint64(e.attempts)))
	}
	return e, nil
}

// Nack hands offset back, owed after delay (capped at the maximum
// visibility; a delayed record holds its place under the in-flight cap).
// attempts, when given, must name the standing delivery.
func (g *Groups) Nack(group string, offset uint64, attempts *uint32, delay time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.standing(group, offset)
	if err != nil {
		return err
	}
	e, err := g.claimed(group, st, offset, attempts)
	if err != nil || e == nil {
		return err
	}
	e.state, e.at = entryOwed, g.cfg.Now().Add(g.cap(max(delay, 0)))
	g.sh.metrics().groupNacks.Inc()
	g.notify()
	return nil
}

// Extend keeps the claim on offset standing for extend from now (capped)
// and returns what it granted; stale_claim once the claim lapsed or went
// out again.
func (g *Groups) Extend(group string, offset uint64, attempts *uint32, extend time.Duration) (time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.standing(group, offset)
	if err != nil {
		return 0, err
	}
	e, err := g.claimed(group, st, offset, attempts)
	if err != nil {
		return 0, err
	}
	now := g.cfg.Now()
	if e == nil || e.state != entryClaimed || !e.at.After(now) {
		g.sh.metrics().groupStaleClaims.Inc()
		return 0, errStaleClaim(group, offset, "the claim lapsed or was handed back")
	}
	granted := g.cap(max(extend, 0))
	e.at = now.Add(granted)
	return granted, nil
}

// DeadLetter lists offset as a dead letter and finishes it; an offset
// already finished is invalid_request.
func (g *Groups) DeadLetter(group string, offset uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.standing(group, offset)
	if err != nil {
		return err
	}
	e, err := g.claimed(group, st, offset, nil)
	if err != nil {
		return err
	}
	delete(st.redriven, offset)
	g.notify()
	return g.deadLetter(group, st, offset, e)
}

// DeadLetters returns group's dead letters in offset order (none for a
// group with no state).
func (g *Groups) DeadLetters(group string) ([]uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file == nil {
		return nil, g.sh.errClosed()
	}
	st := g.loaded(group)
	if st == nil {
		return []uint64{}, nil
	}
	return sortedOffsets(st.dead), nil
}

// Discard drops offset from group's dead letters.
func (g *Groups) Discard(group string, offset uint64) error {
	return g.fromDeadLetters(group, offset, false)
}

// Redrive puts a dead letter back in play: it is owed again, as if never
// delivered.
func (g *Groups) Redrive(group string, offset uint64) error {
	return g.fromDeadLetters(group, offset, true)
}

func (g *Groups) fromDeadLetters(group string, offset uint64, redrive bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file == nil {
		return g.sh.errClosed()
	}
	st := g.loaded(group)
	if st == nil {
		return errNoGroup(group)
	}
	if _, ok := st.dead[offset]; !ok {
		return wire.NewError(wire.CodeInvalidRequest, "group %q: offset %d is not a dead letter", group, offset).
			WithDetail(wire.DetailReason, "not_dead_letter")
	}
	o := offset
	op := groupOp{G: group, Discard: &o}
	if redrive {
		op = groupOp{G: group, Redrive: &o}
	}
	if err := g.persist(op); err != nil {
		return err
	}
	delete(st.dead, offset)
	if !redrive {
		return nil
	}
	if offset < st.cursor {
		st.redriven[offset] = struct{}{}
	}
	st.entries[offset] = &groupEntry{state: entryOwed}
	g.notify()
	return nil
}

// Seek moves group's cursor to start (the oldest record held, the tail,
// or an offset between them), voiding the claims standing; dead letters
// are kept. With ifNew a group that has state is left where it is. It
// returns the group's cursor and whether it moved.
func (g *Groups) Seek(group string, start GroupStart, ifNew bool) (uint64, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file == nil {
		return 0, false, g.sh.errClosed()
	}
	old := g.loaded(group)
	if old != nil && ifNew {
		return old.cursor, false, nil
	}
	lo, hi := g.sh.StartOffset(), g.sh.nextPub.Load()
	target := start.Offset
	switch {
	case start.Earliest:
		target = lo
	case start.Latest:
		target = hi
	case target < lo || target > hi:
		return 0, false, wire.NewError(wire.CodeInvalidRequest, "group %q: offset %d is outside the shard's records [%d, %d]", group, target, lo, hi).
			WithDetail(wire.DetailReason, "seek_out_of_range")
	}
	if old == nil && len(g.saved) >= g.cfg.MaxGroups {
		return 0, false, wire.NewError(wire.CodeOverloaded, "shard %d serves %d consumer groups, its limit", g.sh.index, g.cfg.MaxGroups).
			WithDetail(wire.DetailReason, "group_limit")
	}
	if err := g.persist(groupOp{G: group, Cursor: &target}); err != nil {
		return 0, false, err
	}
	st := newGroupState(target, g.cfg.Now())
	if old != nil {
		st.dead = old.dead
		for o := range old.redriven {
			if o < target {
				st.redriven[o] = struct{}{}
				st.entries[o] = &groupEntry{state: entryOwed}
			}
		}
	}
	g.groups[group] = st
	g.notify()
	return target, true, nil
}

// Describe returns group's cursor and counts; a group with no state has
// no cursor.
func (g *Groups) Describe(group string) (GroupInfo, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file == nil {
		return GroupInfo{}, g.sh.errClosed()
	}
	info := GroupInfo{Tail: g.sh.nextPub.Load()}
	st := g.loaded(group)
	if st == nil {
		return info, nil
	}
	c := st.cursor
	info.Committed = &c
	info.InFlight, info.Owed = st.inFlight(g.cfg.Now())
	info.DeadLetters = len(st.dead)
	return info, nil
}

// Delete removes group's cursor and dead letters; it reports whether the
// group had state.
func (g *Groups) Delete(group string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file == nil {
		return false, g.sh.errClosed()
	}
	if g.loaded(group) == nil {
		return false, nil
	}
	if err := g.persist(groupOp{G: group, Delete: true}); err != nil {
		return false, err
	}
	delete(g.groups, group)
	g.notify()
	return true, nil
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

package felix

import (
	"slices"
	"sync"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// fakeGroups plays consumer groups across a fake cluster: every shard of
// every stream has its records and one group state, shared by the
// brokers (as if the state moved with the shard). Only the shard's owner
// serves a group request; another broker answers not_leader. A poll with
// a wait is answered from a goroutine of its own, as the broker does, so
// it never holds up the requests behind it on its stream.
type fakeGroups struct {
	mu      sync.Mutex
	changed chan struct{}                  // closed and replaced when records are added
	shards  map[fakeShardKey]*fakeGroupLog // by stream and shard
	acks    []fakeGroupAck                 // every ack served, in order
	polls   map[fakeShardKey]int           // polls served per shard
}

type fakeShardKey struct {
	stream string
	shard  uint32
}

// fakeGroupLog is one shard's records and its one group's state.
type fakeGroupLog struct {
	records  [][]byte
	claims   map[uint64]uint32 // offset -> attempts of the claim standing
	done     map[uint64]bool   // acked or dead-lettered
	cursor   *uint64           // set by a seek
	attempts map[uint64]uint32 // deliveries so far
}

// fakeGroupAck is one ack a broker served.
type fakeGroupAck struct {
	broker int
	shard  uint32
	offset uint64
}

func newFakeGroups() *fakeGroups {
	return &fakeGroups{changed: make(chan struct{}), shards: map[fakeShardKey]*fakeGroupLog{}, polls: map[fakeShardKey]int{}}
}

// logLocked returns the shard's log, made on first use. Caller holds mu.
func (fg *fakeGroups) logLocked(stream string, shard uint32) *fakeGroupLog {
	k := fakeShardKey{stream, shard}
	l := fg.shards[k]
	if l == nil {
		l = &fakeGroupLog{claims: map[uint64]uint32{}, done: map[uint64]bool{}, attempts: map[uint64]uint32{}}
		fg.shards[k] = l
	}
	return l
}

// add appends records to a shard and wakes the polls waiting.
func (fg *fakeGroups) add(stream string, shard uint32, payloads ...string) {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	l := fg.logLocked(stream, shard)
	for _, p := range payloads {
		l.records = append(l.records, []byte(p))
	}
	close(fg.changed)
	fg.changed = make(chan struct{})
}

// ackList returns a copy of the acks served.
func (fg *fakeGroups) ackList() []fakeGroupAck {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	return slices.Clone(fg.acks)
}

// pollsOf returns how many polls of the shard were served.
func (fg *fakeGroups) pollsOf(stream string, shard uint32) int {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	return fg.polls[fakeShardKey{stream, shard}]
}

// claimLocked hands out up to max records not finished and not claimed.
// Caller holds mu.
func (fg *fakeGroups) claimLocked(m *wire.GroupPoll) []wire.GroupRecord {
	l := fg.logLocked(m.Stream, m.Shard)
	recs := []wire.GroupRecord{}
	start := uint64(0)
	if l.cursor != nil {
		start = *l.cursor
	}
	for off := start; off < uint64(len(l.records)) && len(recs) < int(m.MaxRecords); off++ {
		if l.done[off] {
			continue
		}
		if _, held := l.claims[off]; held {
			continue
		}
		l.attempts[off]++
		l.claims[off] = l.attempts[off]
		recs = append(recs, wire.GroupRecord{Offset: off, Payload: l.records[off], Attempts: l.attempts[off]})
	}
	return recs
}

// send writes m on s, one writer at a time per broker: a waiting poll's
// answer and the stream's other answers never interleave.
func (fb *fakeBroker) send(s transport.Stream, m wire.Message) error {
	fb.wmu.Lock()
	defer fb.wmu.Unlock()
	return writeMsg(s, m)
}

// groupScopeOf returns the scope and request id of a group request.
func groupScopeOf(msg wire.Message) (*wire.GroupScope, *uint64, bool) {
	switch m := msg.(type) {
	case *wire.GroupPoll:
		return &m.GroupScope, &m.RequestID, true
	case *wire.GroupAck:
		return &m.GroupScope, &m.RequestID, true
	case *wire.GroupNack:
		return &m.GroupScope, &m.RequestID, true
	case *wire.GroupExtend:
		return &m.GroupScope, &m.RequestID, true
	case *wire.GroupDeadLetter:
		return &m.GroupScope, &m.RequestID, true
	case *wire.GroupSeek:
		return &m.GroupScope, &m.RequestID, true
	case *wire.GroupDescribe:
		return &m.GroupScope, &m.RequestID, true
	case *wire.GroupDelete:
		return &m.GroupScope, &m.RequestID, true
	}
	return nil, nil, false
}

// clusterGroupOp serves a group request on fb when the fake cluster plays
// groups; handled is false for any other message.
func (fb *fakeBroker) clusterGroupOp(cl *fakeCluster, s transport.Stream, msg wire.Message) (handled, keep bool) {
	sc, id, ok := groupScopeOf(msg)
	if !ok {
		return false, true
	}
	if nl := cl.redirect(fb, KindStream, sc.Namespace, sc.Stream, sc.Shard); nl != nil {
		nl.RequestID = id
		return true, fb.send(s, nl) == nil
	}
	fg := cl.groups
	if m, ok := msg.(*wire.GroupPoll); ok {
		fb.wg.Add(1)
		go func() {
			defer fb.wg.Done()
			_ = fb.send(s, fb.fakePoll(cl, m))
		}()
		return true, true
	}
	fg.mu.Lock()
	l := fg.logLocked(sc.Stream, sc.Shard)
	var ans wire.Message
	switch m := msg.(type) {
	case *wire.GroupAck:
		fg.acks = append(fg.acks, fakeGroupAck{broker: cl.indexOf(fb), shard: m.Shard, offset: *m.Offset})
		delete(l.claims, *m.Offset)
		l.done[*m.Offset] = true
		ans = &wire.CacheOK{RequestID: m.RequestID}
	case *wire.GroupNack:
		if a, held := l.claims[*m.Offset]; !held || (m.Attempts != nil && *m.Attempts != a) {
			ans = staleClaimAnswer(m.RequestID)
		} else {
			delete(l.claims, *m.Offset)
			ans = &wire.CacheOK{RequestID: m.RequestID}
		}
	case *wire.GroupExtend:
		ans = &wire.GroupExtended{VisibleMS: m.ExtendMS, RequestID: m.RequestID}
	case *wire.GroupDeadLetter:
		delete(l.claims, *m.Offset)
		l.done[*m.Offset] = true
		ans = &wire.CacheOK{RequestID: m.RequestID}
	case *wire.GroupSeek:
		moved := !m.IfNew || l.cursor == nil
		if moved {
			off := uint64(len(l.records)) // latest
			switch {
			case m.Start.Earliest:
				off = 0
			case !m.Start.Latest:
				off = m.Start.Offset
			}
			l.cursor = &off
			l.claims = map[uint64]uint32{}
		}
		ans = &wire.GroupPosition{Offset: *l.cursor, Moved: moved, RequestID: m.RequestID}
	case *wire.GroupDescribe:
		ans = &wire.GroupInfo{Committed: l.cursor, Tail: uint64(len(l.records)), InFlight: uint64(len(l.claims)), RequestID: m.RequestID}
	case *wire.GroupDelete:
		existed := l.cursor != nil
		l.cursor = nil
		ans = &wire.GroupDeleted{Existed: existed, RequestID: m.RequestID}
	}
	fg.mu.Unlock()
	return true, fb.send(s, ans) == nil
}

func staleClaimAnswer(id uint64) wire.Message {
	e := wire.NewError(wire.CodeStaleClaim, "the claim no longer stands").ErrorMessage(true)
	e.RequestID = &id
	return e
}

// fakePoll answers a poll: what is unclaimed now, or what comes within
// its wait; a shard that moves away meanwhile is answered not_leader.
func (fb *fakeBroker) fakePoll(cl *fakeCluster, m *wire.GroupPoll) wire.Message {
	fg := cl.groups
	deadline := time.Now().Add(time.Duration(m.WaitMS) * time.Millisecond)
	for {
		fg.mu.Lock()
		recs := fg.claimLocked(m)
		ch := fg.changed
		if len(recs) > 0 || !time.Now().Before(deadline) {
			fg.polls[fakeShardKey{m.Stream, m.Shard}]++
			fg.mu.Unlock()
			return &wire.GroupRecords{Records: recs, RequestID: m.RequestID}
		}
		fg.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(5 * time.Millisecond): // a shard may have moved
		case <-fb.ctx.Done():
			return &wire.GroupRecords{Records: []wire.GroupRecord{}, RequestID: m.RequestID}
		}
		if nl := cl.redirect(fb, KindStream, m.Namespace, m.Stream, m.Shard); nl != nil {
			nl.RequestID = &m.RequestID
			return nl
		}
	}
}

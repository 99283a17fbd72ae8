package broker

import (
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Consumer groups (FEATURE_CONSUMER_GROUP and its three companions,
// advertised with durable storage), served on the control stream by the
// shard's owner alone: a broker that does not own the shard answers
// not_leader (or an error naming the owner) and never forwards, since a
// relayed poll would put the claim and its acknowledgement on different
// brokers. Every request is authorized on the stream's resource:
// group.consume for all but seek and delete, which need group.manage.
//
// A poll that finds nothing and may wait is answered from a goroutine of
// the stream's answer group, woken by the shard's tail advancing or the
// group handing a record back (core.Groups.WaitC), by its next lapse, by
// its deadline (capped at FELIX_GROUP_MAX_WAIT_MS), or by the stream's
// end. At most Config.GroupMaxWaitingPolls wait at once on the broker;
// past it a poll is answered at once with what there is.

// groupsFor validates and authorizes a group request and resolves its
// shard's groups.
func (cs *controlStream) groupsFor(v wire.Validator, s *wire.GroupScope, action auth.Action) (*core.Groups, *wire.Error) {
	if err := v.Validate(); err != nil {
		return nil, asWireError(err)
	}
	if e := cs.authorize(s.TenantID, action, auth.StreamResource(s.TenantID, s.Namespace, s.Stream)); e != nil {
		return nil, e
	}
	st, e := cs.srv.resolveStream(s.TenantID, s.Namespace, s.Stream)
	if e != nil {
		return nil, e
	}
	if err := wire.CheckShard("stream", s.Stream, s.Shard, st.Shards()); err != nil {
		return nil, asWireError(err)
	}
	if e := cs.srv.routeRefusal(wire.ShardKindStream, s.TenantID, s.Namespace, s.Stream, s.Shard); e != nil {
		return nil, e
	}
	sh, err := cs.srv.servedShard(st, s.Shard)
	if err != nil {
		return nil, asWireError(err)
	}
	g, err := sh.Groups()
	if err != nil {
		return nil, asWireError(err)
	}
	return g, nil
}

// handleGroup serves every group request but the poll.
func (cs *controlStream) handleGroup(msg wire.Message) {
	var (
		v      wire.Validator
		scope  *wire.GroupScope
		rid    uint64
		action = auth.ActionGroupConsume
		run    func(g *core.Groups) (wire.Message, error)
		// readOnly requests are answered without a round on a Quorum
		// shard.
		readOnly bool
	)
	ok := func(rid uint64) wire.Message { return &wire.CacheOK{RequestID: rid} }
	switch m := msg.(type) {
	case *wire.GroupAck:
		v, scope, rid = m, &m.GroupScope, m.RequestID
		run = func(g *core.Groups) (wire.Message, error) { return ok(rid), g.Ack(m.Group, *m.Offset) }
	case *wire.GroupNack:
		v, scope, rid = m, &m.GroupScope, m.RequestID
		run = func(g *core.Groups) (wire.Message, error) {
			return ok(rid), g.Nack(m.Group, *m.Offset, m.Attempts, msOf(m.DelayMS))
		}
	case *wire.GroupExtend:
		v, scope, rid = m, &m.GroupScope, m.RequestID
		run = func(g *core.Groups) (wire.Message, error) {
			d, err := g.Extend(m.Group, *m.Offset, m.Attempts, time.Duration(min(m.ExtendMS, maxMS))*time.Millisecond)
			return &wire.GroupExtended{VisibleMS: uint64(d.Milliseconds()), RequestID: rid}, err
		}
	case *wire.GroupDeadLetter:
		v, scope, rid = m, &m.GroupScope, m.RequestID
		run = func(g *core.Groups) (wire.Message, error) { return ok(rid), g.DeadLetter(m.Group, *m.Offset) }
	case *wire.GroupDeadLetters:
		v, scope, rid, readOnly = m, &m.GroupScope, m.RequestID, true
		run = func(g *core.Groups) (wire.Message, error) {
			offs, err := g.DeadLetters(m.Group)
			return &wire.GroupDeadLetterList{Offsets: offs, RequestID: rid}, err
		}
	case *wire.GroupDiscard:
		v, scope, rid = m, &m.GroupScope, m.RequestID
		run = func(g *core.Groups) (wire.Message, error) { return ok(rid), g.Discard(m.Group, *m.Offset) }
	case *wire.GroupRedrive:
		v, scope, rid = m, &m.GroupScope, m.RequestID
		run = func(g *core.Groups) (wire.Message, error) { return ok(rid), g.Redrive(m.Group, *m.Offset) }
	case *wire.GroupDescribe:
		v, scope, rid, readOnly = m, &m.GroupScope, m.RequestID, true
		run = func(g *core.Groups) (wire.Message, error) {
			info, err := g.Describe(m.Group)
			return &wire.GroupInfo{Committed: info.Committed, Tail: info.Tail, InFlight: uint64(info.InFlight),
				Owed: uint64(info.Owed), DeadLetters: uint64(info.DeadLetters), RequestID: rid}, err
		}
	case *wire.GroupSeek:
		v, scope, rid, action = m, &m.GroupScope, m.RequestID, auth.ActionGroupManage
		run = func(g *core.Groups) (wire.Message, error) {
			start := core.GroupStart{}
			if m.Start != nil {
				start = core.GroupStart{Earliest: m.Start.Earliest, Latest: m.Start.Latest, Offset: m.Start.Offset}
			}
			off, moved, err := g.Seek(m.Group, start, m.IfNew)
			return &wire.GroupPosition{Offset: off, Moved: moved, RequestID: rid}, err
		}
	case *wire.GroupDelete:
		v, scope, rid, action = m, &m.GroupScope, m.RequestID, auth.ActionGroupManage
		run = func(g *core.Groups) (wire.Message, error) {
			existed, err := g.Delete(m.Group)
			return &wire.GroupDeleted{Existed: existed, RequestID: rid}, err
		}
	default:
		return
	}
	g, e := cs.groupsFor(v, scope, action)
	if e == nil {
		e = groupsDeposed(g)
	}
	if e != nil {
		cs.sendRefusal(e, &rid)
		return
	}
	ans, err := run(g)
	if err != nil {
		cs.sendError(asWireError(err), &rid)
		return
	}
	if readOnly || !groupsQuorum(g) {
		cs.sendMsg(ans)
		return
	}
	// On a Quorum shard a request is answered once a majority holds the
	// state it left and has confirmed this broker still leads
	// (repl_groups.go), without holding up the stream's other requests.
	after := g.Version()
	if !cs.durableAnswers.Go(func() {
		if e := cs.srv.awaitGroups(g.Shard(), after); e != nil {
			cs.sendError(e, &rid)
			return
		}
		cs.sendMsg(ans)
	}) {
		cs.sendError(wire.NewError(wire.CodeShardUnavailable, "the stream is ending; the group change may still take effect"), &rid)
	}
}

// groupsQuorum reports whether g's shard is a replicated Quorum shard.
func groupsQuorum(g *core.Groups) bool {
	sr, ok := g.Shard().Replication().(*shardRepl)
	return ok && sr.isQuorum()
}

// groupsDeposed refuses a group request on a Quorum shard whose
// follower answered that a newer leader fenced it: this broker may no
// longer lead the shard, and its group state may be stale.
func groupsDeposed(g *core.Groups) *wire.Error {
	sr, ok := g.Shard().Replication().(*shardRepl)
	if !ok || !sr.isQuorum() {
		return nil
	}
	for _, sp := range *sr.shippers.Load() {
		if sp.groups != nil && sp.groups.deposed.Load() {
			return sr.errDeposed("a follower was fenced by a newer leader")
		}
	}
	return nil
}

// maxMS caps a duration in milliseconds so it converts without overflow.
const maxMS = uint64(100 * 365 * 24 * time.Hour / time.Millisecond)

func msOf(p *uint64) time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(min(*p, maxMS)) * time.Millisecond
}

// handleGroupPoll serves a group_poll, waiting for work when it may.
func (cs *controlStream) handleGroupPoll(m *wire.GroupPoll) {
	rid := m.RequestID
	g, e := cs.groupsFor(m, &m.GroupScope, auth.ActionGroupConsume)
	if e == nil {
		e = groupsDeposed(g)
	}
	if e != nil {
		cs.sendRefusal(e, &rid)
		return
	}
	p := &groupPoll{cs: cs, g: g, m: m, max: min(int(m.MaxRecords), cs.srv.cfg.MaxRecordsPerRead), vis: msOf(m.VisibilityMS)}
	wait := min(time.Duration(min(m.WaitMS, maxMS))*time.Millisecond, cs.srv.cfg.GroupMaxWait)
	waitC := g.WaitC()
	recs, err := p.poll()
	if err == nil && len(recs) > 0 && groupsQuorum(g) {
		if !cs.durableAnswers.Go(func() { p.confirmed(recs) }) {
			p.handBack(recs)
			p.answer(nil, nil)
		}
		return
	}
	if err != nil || len(recs) > 0 || wait <= 0 || !cs.srv.groupWaiters.TryAcquire(1) {
		p.answer(recs, err)
		return
	}
	deadline := time.Now().Add(wait)
	if !cs.durableAnswers.Go(func() {
		defer cs.srv.groupWaiters.Release(1)
		p.wait(waitC, deadline)
	}) {
		cs.srv.groupWaiters.Release(1)
		p.answer(nil, nil)
	}
}

// groupPoll is one poll being served.
type groupPoll struct {
	cs  *controlStream
	g   *core.Groups
	m   *wire.GroupPoll
	max int
	vis time.Duration
}

func (p *groupPoll) poll() ([]core.GroupRecord, error) {
	return p.g.Poll(p.m.Group, p.max, p.vis)
}

// wait polls again each time waitC closes or a claim may have lapsed,
// until records come, the deadline passes or the stream ends.
func (p *groupPoll) wait(waitC <-chan struct{}, deadline time.Time) {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		next := deadline
		if l := p.g.NextLapse(p.m.Group); !l.IsZero() && l.Before(next) {
			next = l
		}
		t.Reset(max(time.Until(next), time.Millisecond))
		select {
		case <-waitC:
		case <-t.C:
		case <-p.cs.ended:
			p.answer(nil, nil)
			return
		case <-p.cs.ctx.Done():
			return
		case <-p.cs.srv.workCtx.Done():
			p.answer(nil, nil)
			return
		}
		waitC = p.g.WaitC()
		recs, err := p.poll()
		if err == nil && len(recs) > 0 && groupsQuorum(p.g) {
			p.confirmed(recs)
			return
		}
		if err != nil || len(recs) > 0 || !time.Now().Before(deadline) {
			p.answer(recs, err)
			return
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}

// confirmed answers a poll's records on a Quorum shard once a majority of
// the replica set holds the group's state and has confirmed this broker
// still leads (repl_groups.go); otherwise it hands the claims back and
// refuses the poll (not_leader when deposed, quorum_timeout).
func (p *groupPoll) confirmed(recs []core.GroupRecord) {
	if e := p.cs.srv.awaitGroups(p.g.Shard(), p.g.Version()); e != nil {
		p.handBack(recs)
		p.answer(nil, e)
		return
	}
	p.answer(recs, nil)
}

// handBack returns claims not delivered.
func (p *groupPoll) handBack(recs []core.GroupRecord) {
	for _, r := range recs {
		a := r.Attempts
		_ = p.g.Nack(p.m.Group, r.Offset, &a, 0) // a claim that lapsed meanwhile comes round anyway
	}
}

// answer sends a poll's records, handing back any a frame cannot carry.
func (p *groupPoll) answer(recs []core.GroupRecord, err error) {
	cs, rid := p.cs, p.m.RequestID
	if err != nil {
		cs.sendError(asWireError(err), &rid)
		return
	}
	budget := int(cs.srv.cfg.MaxFrameBytes)/2 - 1024
	out := &wire.GroupRecords{Records: make([]wire.GroupRecord, 0, len(recs)), RequestID: rid}
	pub := cs.features&wire.FeatureGroupPublisher != 0
	stamps := cs.features&wire.FeatureRecordTimestamps != 0
	for i, r := range recs {
		cost := 4*len(r.Payload)/3 + 128
		if budget -= cost; budget < 0 && i > 0 {
			for _, back := range recs[i:] {
				a := back.Attempts
				_ = p.g.Nack(p.m.Group, back.Offset, &a, 0) // a claim that lapsed meanwhile comes round anyway
			}
			break
		}
		gr := wire.GroupRecord{Offset: r.Offset, Payload: r.Payload, Attempts: r.Attempts}
		if gr.Payload == nil {
			gr.Payload = []byte{}
		}
		if pub {
			gr.Publisher = r.Publisher
		}
		if stamps {
			gr.TimestampMicros = r.TimeMicros
		}
		out.Records = append(out.Records, gr)
	}
	cs.sendMsg(out)
}

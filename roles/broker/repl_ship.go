package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/wire"
)

// TypeReplAppend is the peer call a shard's leader ships records to a
// follower with (docs/protocol.md, "Replication").
const TypeReplAppend = "repl_append"

// Shipping bounds: one repl_append carries at most this many records and
// about this many payload bytes; a follower is sent an empty call at
// least every shipIdle so that it learns the committed mark, and one call
// may take shipCallTimeout.
const (
	shipMaxRecords  = 4096
	shipMaxBytes    = 1 << 20
	shipIdle        = time.Second
	shipCallTimeout = 10 * time.Second
	shipMinBackoff  = 50 * time.Millisecond
	shipMaxBackoff  = 2 * time.Second
)

// Pipelining: a shipper keeps up to shipWindow calls, and while under
// shipWindowBytes of body, in flight to its follower, each starting where
// the one before it ends. A follower waits up to shipAwaitPrior for the
// calls before one (after_prior) that reach it later, since the peer
// link's call streams do not keep the calls' order.
const (
	shipWindow      = 4
	shipWindowBytes = 4 << 20
	shipAwaitPrior  = time.Second
	// shipMinPipelined is the fewest records a call joining a window
	// that is not empty carries.
	shipMinPipelined = 32
	// shipKeptBuffers is how many encode buffers (each up to 2 MiB) an
	// idle shipper keeps for reuse; a fuller window allocates the rest.
	shipKeptBuffers = 2
)

// replAppend is a repl_append call's header.
type replAppend struct {
	TenantID    string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	Stream      string `json:"stream"`
	Incarnation string `json:"incarnation,omitempty"`
	Shard       uint32 `json:"shard"`
	// Generation is the leader's: the follower refuses another.
	Generation uint64 `json:"generation"`
	// From is the offset of the body's first record (or, with no records,
	// where the leader believes the follower is).
	From uint64 `json:"from"`
	// Committed is the leader's committed mark: the follower's retention
	// keeps everything from it. Absent (all ones) when nothing is held back.
	Committed uint64 `json:"committed"`
	// PrevGeneration is the generation of the leader's record at From-1
	// (0 at the start of its log): the follower checks that its own copy
	// agrees there before it appends (Raft's log matching check).
	PrevGeneration uint64 `json:"prev_generation"`
	// TruncateTo, when set, makes the follower first cut its copy back to
	// that offset: the suffix an older leader wrote that this one's log
	// does not have.
	TruncateTo *uint64 `json:"truncate_to,omitempty"`
	// AfterPrior says that calls before this one are still in flight: a
	// follower whose copy ends before From waits for them (up to
	// shipAwaitPrior) before it refuses the gap.
	AfterPrior bool `json:"after_prior,omitempty"`
	// Tail is where the leader's log ended when it made the call: a
	// damaged follower that holds it is whole again (absent from older
	// leaders).
	Tail uint64 `json:"tail,omitempty"`
}

// replAppended is a repl_append reply's header: how far the follower's
// copy reaches, and how far it holds it under its fsync policy.
type replAppended struct {
	Next    uint64 `json:"next"`
	Durable uint64 `json:"durable"`
}

// shipper ships one shard's log to one follower.
type shipper struct {
	sr          *shardRepl
	node        string
	generation  uint64
	incarnation string

	wakeC  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	// acked is one past the last record the follower holds durably (as it
	// last answered); the committed mark counts it.
	acked atomic.Uint64
	// next is where the follower's copy ends as far as the shipper knows
	// (what it ships from next).
	next atomic.Uint64
	// halted is why the follower cannot be shipped to (nil while it
	// can), and haltedAt when that began (Unix ms).
	halted   atomic.Pointer[string]
	haltedAt atomic.Int64
	// answered counts the follower's answers to repl_append; probe asks
	// for a call now even with nothing to ship (a handoff wants a fresh
	// answer: handoff.go).
	answered atomic.Uint64
	probe    atomic.Bool
	// failed counts the repl_append calls to the follower that failed.
	failed atomic.Uint64
	// groups ships the shard's group state beside the log
	// (repl_groups.go); set before the shipper is published.
	groups *groupsShipper

	// Owned by run: window is the calls in flight, oldest first, and
	// windowBytes their bodies' size; winCtx bounds them (cancelled when
	// the window is dropped); bufs are encode buffers to reuse (a call's
	// body comes back with its result). prevAt and prevGen, when
	// prevAt > 0, say that the leader's record at prevAt-1 is of
	// generation prevGen (the last record shipped), sparing a read of it.
	// Invariant: the window's calls are contiguous, each starting at the
	// end of the one before, and an alone call is in flight by itself.
	window      []*shipCall
	windowBytes int
	winCtx      context.Context
	winCancel   context.CancelFunc
	bufs        [][]byte
	prevAt      uint64
	prevGen     uint64
}

// shipCall is one repl_append in flight.
type shipCall struct {
	// from and end bound the records shipped, [from, end); end == from
	// for an empty call. bytes is the body's size, payloads the records'.
	from, end       uint64
	bytes, payloads int
	// truncate is the cut the call asks for; such a call, and an empty
	// one, is alone in the window.
	truncate *uint64
	alone    bool
	// resC receives the call's outcome (one slot).
	resC chan shipResult
}

// shipResult is a call's outcome, with its body's buffer back for reuse.
type shipResult struct {
	rep replAppended
	err error
	buf []byte
}

func newShipper(sr *shardRepl, node string, generation uint64, incarnation string) *shipper {
	ctx, cancel := context.WithCancel(sr.r.s.bgCtx)
	return &shipper{sr: sr, node: node, generation: generation, incarnation: incarnation,
		wakeC: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

func (sp *shipper) start() {
	sp.done.Add(1)
	go sp.run()
	sp.startGroups()
}

// stop ends the shipper and waits for its goroutine.
func (sp *shipper) stop() {
	sp.cancel()
	sp.done.Wait()
	if sp.halted.Load() != nil {
		sp.sr.r.followersHalted.Add(-1)
	}
}

// wake tells the shipper the log grew; it never blocks.
func (sp *shipper) wake() {
	select {
	case sp.wakeC <- struct{}{}:
	default:
	}
}

// run ships until stopped. It starts from the leader's tail with an
// empty call: the follower answers where its copy ends, and the shipper
// sends from there. Records are shipped as soon as the leader's log has
// them, before its own fsync, with up to shipWindow calls in flight;
// answers are taken in the order the calls were sent, each covering a
// prefix. Any failure drops the window and starts again from the failed
// call (or from where the follower's refusal says).
func (sp *shipper) run() {
	defer sp.done.Done()
	defer sp.dropWindow()
	var sendAt uint64    // where the next call ships from
	var truncate *uint64 // a cut the follower must make before the next append
	probed := false
	backoff := shipMinBackoff
	idle := time.NewTimer(shipIdle)
	defer idle.Stop()
	lastSent := time.Time{}
	for sp.ctx.Err() == nil {
		sh := sp.sr.leaderShard()
		if sh == nil {
			sendAt = sp.rewind(sendAt)
			if !sp.sleep(100 * time.Millisecond) {
				return
			}
			continue
		}
		tail := sh.LogNextOffset()
		if !probed {
			sendAt, probed = tail, true
		}
		if sp.mayAdd(truncate, sendAt, tail) {
			idleDue := lastSent.IsZero() || time.Since(lastSent) >= shipIdle || sp.probe.Load()
			if sendAt < tail || (len(sp.window) == 0 && (truncate != nil || idleDue)) {
				restart := sp.windowStart(sendAt)
				sent, wait := sp.ship(sh, sendAt, tail, truncate)
				if sent != nil {
					sendAt, truncate, lastSent = sent.end, nil, time.Now()
					continue
				}
				// Nothing was sent and the window was dropped: ship
				// again from its start after the wait.
				sendAt = restart
				if !sp.sleep(wait) {
					return
				}
				continue
			}
		}
		var headC <-chan shipResult
		var idleC <-chan time.Time
		if len(sp.window) > 0 {
			headC = sp.window[0].resC
		} else {
			idle.Reset(shipIdle - time.Since(lastSent))
			idleC = idle.C
		}
		select {
		case res := <-headC:
			var ok bool
			if sendAt, truncate, ok = sp.answered1(sh, res, sendAt, &backoff); !ok {
				return
			}
		case <-sp.wakeC:
		case <-idleC:
		case <-sp.ctx.Done():
			return
		}
	}
}

// mayAdd reports whether another call may join the window, shipping
// from sendAt with the log ending at tail: it has room, neither the calls
// in it nor the next one must be alone, and the next one would carry at
// least shipMinPipelined records (a few records wait for the answer to
// the oldest call instead, so that they leave in one call rather than
// many small ones, each costing the follower a write).
func (sp *shipper) mayAdd(truncate *uint64, sendAt, tail uint64) bool {
	n := len(sp.window)
	if n == 0 {
		return true
	}
	return truncate == nil && !sp.window[n-1].alone && n < shipWindow && sp.windowBytes < shipWindowBytes &&
		tail >= sendAt+shipMinPipelined
}

// ship reads what the leader's log holds from sendAt and sends it in one
// call (empty when sendAt is the tail). It returns the call, or nil and
// how long to wait before trying again (the log could not be read, or a
// halted follower's empty call was answered); then the window has been
// dropped, and the caller ships again from where it started (rewind).
func (sp *shipper) ship(sh *core.Shard, sendAt, tail uint64, truncate *uint64) (*shipCall, time.Duration) {
	var recs []flog.Record
	if sendAt < tail {
		var err error
		n := shipMaxRecords
		if m := int(sp.sr.r.shipRecords.Load()); m > 0 {
			n = min(m, n)
		}
		recs, _, err = sh.ReadLog(sendAt, tail, n, shipMaxBytes)
		var ce *flog.CursorError
		if errors.As(err, &ce) && ce.TooOld {
			sp.dropWindow()
			sp.halt(fmt.Sprintf("needs offset %d, which retention removed (the leader's log starts at %d)", sendAt, ce.Available))
			// Still call, empty, so the follower hears its leader and
			// does not report it silent.
			if c, err := sp.send(sh, sendAt, nil, nil); err == nil {
				res := <-c.resC
				sp.dropCall(c, res)
			}
			return nil, min(shipIdle, shipMaxBackoff)
		}
		if err != nil {
			sp.dropWindow()
			return nil, shipMinBackoff
		}
	}
	sp.probe.Store(false)
	c, err := sp.send(sh, sendAt, recs, truncate)
	if err != nil {
		sp.sr.r.s.repl.shipFailures.Inc()
		sp.failed.Add(1)
		sp.dropWindow()
		return nil, shipMinBackoff
	}
	return c, 0
}

// answered1 takes the answer to the oldest call in the window and returns
// where to ship from next and the cut to ask for; false when the shipper
// stopped.
func (sp *shipper) answered1(sh *core.Shard, res shipResult, sendAt uint64, backoff *time.Duration) (uint64, *uint64, bool) {
	s := sp.sr.r.s
	head := sp.window[0]
	sp.dropCall(head, res)
	tail := sh.LogNextOffset()
	if err := res.err; err != nil {
		s.repl.shipFailures.Inc()
		sp.failed.Add(1)
		sp.dropWindow()
		var we *wire.Error
		if errors.As(err, &we) {
			if want, ok := gapWant(we); ok {
				*backoff = shipMinBackoff
				return sp.resumeAt(want, tail), nil, true
			}
			if cut, ok := sp.divergedAt(sh, we); ok {
				// The follower's copy disagrees with the leader's
				// before the call: cut it back to where they agree.
				*backoff = shipMinBackoff
				return cut, &cut, true
			}
		}
		if !sp.sleep(*backoff) {
			return 0, nil, false
		}
		if !viewBehind(err) {
			// A follower whose view is behind fetches it at once:
			// ask again soon rather than back off (a new leader's
			// first calls meet this, and its acknowledgements
			// wait for them).
			*backoff = min(2**backoff, shipMaxBackoff)
		}
		return head.from, head.truncate, true
	}
	*backoff = shipMinBackoff
	rep := res.rep
	if rep.Next > tail {
		// The follower holds records past the leader's tail: an older
		// leader's, never committed. Cut them (the follower refuses if
		// they are not older than this leader).
		sp.dropWindow()
		cut := tail
		return cut, &cut, true
	}
	if len(sp.window) == 0 || rep.Next < head.end {
		// Nothing else in flight (or the copy ends short of the call,
		// which only a cut between could do): ship from where the
		// follower says its copy ends.
		sp.dropWindow()
		sendAt = sp.resumeAt(rep.Next, tail)
	} else {
		sp.unhalt()
	}
	sp.next.Store(rep.Next)
	if rep.Durable > sp.acked.Load() {
		sp.acked.Store(rep.Durable)
		sp.sr.followerAcked()
	}
	sp.answered.Add(1)
	if n := head.end - head.from; n > 0 {
		s.repl.shippedRecords.Add(int(n))
		s.repl.shippedBytes.Add(head.payloads)
	}
	return sendAt, nil, true
}

// dropCall takes a call answered (res) out of the window's accounting and
// keeps its buffer for reuse. The call must be the window's oldest, or
// out of the window already.
func (sp *shipper) dropCall(c *shipCall, res shipResult) {
	if len(sp.window) > 0 && sp.window[0] == c {
		sp.window[0] = nil
		sp.window = sp.window[1:]
		sp.windowBytes -= c.bytes
	}
	if cap(res.buf) > 0 && cap(res.buf) <= 2*shipMaxBytes && len(sp.bufs) < shipKeptBuffers {
		sp.bufs = append(sp.bufs, res.buf[:0])
	}
}

// windowStart is where the window's oldest call ships from, or sendAt
// when the window is empty.
func (sp *shipper) windowStart(sendAt uint64) uint64 {
	if len(sp.window) > 0 {
		return sp.window[0].from
	}
	return sendAt
}

// rewind drops the window and returns where to ship from again: the start
// of its oldest call, or sendAt when it was empty.
func (sp *shipper) rewind(sendAt uint64) uint64 {
	sendAt = sp.windowStart(sendAt)
	sp.dropWindow()
	return sendAt
}

// dropWindow gives up the calls in flight: their contexts are cancelled
// and their outcomes, once they come, ignored.
func (sp *shipper) dropWindow() {
	if sp.winCancel != nil {
		sp.winCancel()
		sp.winCtx, sp.winCancel = nil, nil
	}
	for len(sp.window) > 0 {
		c := sp.window[0]
		sp.dropCall(c, <-c.resC)
	}
	sp.window = sp.window[:0]
	sp.windowBytes = 0
}

// resumeAt is where to ship from after the follower said its copy ends at
// want. A copy past the leader's tail diverged (it holds records the
// leader does not): nothing is shipped to it until a failover's
// truncation, which is not built yet.
func (sp *shipper) resumeAt(want, tail uint64) uint64 {
	if want > tail {
		sp.halt(fmt.Sprintf("its copy ends at %d, past the leader's tail %d: it diverged", want, tail))
		return tail
	}
	sp.unhalt()
	return want
}

// divergedAt reads a follower's diverged refusal: the generation of its
// record before the offset shipped, and where its copy ends. The copies
// agree up to the end of that generation in the leader's log (or the end
// of the follower's copy, if sooner).
func (sp *shipper) divergedAt(sh *core.Shard, e *wire.Error) (uint64, bool) {
	if e.Detail[wire.DetailReason] != replReasonDiverged {
		return 0, false
	}
	g, ok1 := detailUint(e.Detail["generation"])
	fnext, ok2 := detailUint(e.Detail["next"])
	if !ok1 || !ok2 {
		return 0, false
	}
	end, err := sh.EndOfGeneration(g)
	if err != nil {
		return 0, false
	}
	return min(end, fnext), true
}

// send starts one repl_append of recs from offset from, in the window:
// the call runs on a goroutine of its own and its outcome goes to the
// returned call's resC.
func (sp *shipper) send(sh *core.Shard, from uint64, recs []flog.Record, truncate *uint64) (*shipCall, error) {
	committed := sp.sr.Committed()
	prev := sp.prevGen
	if sp.prevAt == 0 || sp.prevAt != from {
		var err error
		if prev, err = sh.GenerationBefore(from); err != nil {
			return nil, err
		}
	}
	h, err := json.Marshal(replAppend{TenantID: sp.sr.ref.tenant, Namespace: sp.sr.ref.ns, Stream: sp.sr.ref.name,
		Incarnation: sp.incarnation, Shard: sp.sr.ref.shard, Generation: sp.generation, From: from, Committed: committed,
		PrevGeneration: prev, TruncateTo: truncate, AfterPrior: len(sp.window) > 0, Tail: sh.LogNextOffset()})
	if err != nil {
		return nil, err
	}
	var buf []byte
	if n := len(sp.bufs); n > 0 {
		buf, sp.bufs = sp.bufs[n-1], sp.bufs[:n-1]
	}
	body, err := appendReplRecords(buf, recs)
	if err != nil {
		return nil, err
	}
	c := &shipCall{from: from, end: from + uint64(len(recs)), bytes: len(body), truncate: truncate,
		alone: len(recs) == 0 || truncate != nil, resC: make(chan shipResult, 1)}
	for i := range recs {
		c.payloads += len(recs[i].Payload)
	}
	if len(recs) > 0 {
		last := &recs[len(recs)-1]
		sp.prevAt, sp.prevGen = last.Offset+1, last.Generation
	}
	if sp.winCtx == nil {
		sp.winCtx, sp.winCancel = context.WithCancel(sp.ctx)
	}
	sp.window = append(sp.window, c)
	sp.windowBytes += c.bytes
	ctx := sp.winCtx
	req := peer.Request{Type: TypeReplAppend, Header: h, Body: body}
	go func() {
		rep, err := sp.call(ctx, from, len(recs), req)
		c.resC <- shipResult{rep: rep, err: err, buf: body}
	}()
	return c, nil
}

// call makes one repl_append call to the follower and reads its answer.
func (sp *shipper) call(ctx context.Context, from uint64, records int, req peer.Request) (replAppended, error) {
	s := sp.sr.r.s
	ctx, cancel := context.WithTimeout(ctx, shipCallTimeout)
	defer cancel()
	if hook := s.repl.shipHook.Load(); hook != nil {
		if err := (*hook)(ctx, sp.node, from, records); err != nil {
			return replAppended{}, err
		}
	}
	ep := s.Peer()
	b, ok := s.routes.Broker(sp.node)
	if ep == nil || !ok || b.PeerAddr == "" {
		return replAppended{}, fmt.Errorf("no peer address for follower %s", sp.node)
	}
	rep, err := ep.Call(ctx, peer.Target{NodeID: sp.node, Addr: b.PeerAddr}, req)
	if err != nil {
		return replAppended{}, err
	}
	if rep.Err != nil {
		return replAppended{}, rep.Err
	}
	var out replAppended
	if err := json.Unmarshal(rep.Header, &out); err != nil {
		return replAppended{}, fmt.Errorf("repl_append answer: %w", err)
	}
	return out, nil
}

// gapWant reads the offset a follower asked for from its offset_gap
// refusal.
func gapWant(e *wire.Error) (uint64, bool) {
	if e.Detail[wire.DetailReason] != replReasonGap {
		return 0, false
	}
	return detailUint(e.Detail["next"])
}

// detailUint reads an unsigned number from a refusal's detail, as JSON
// decoded it or as it was set.
func detailUint(d any) (uint64, bool) {
	switch v := d.(type) {
	case float64:
		return uint64(v), true
	case uint64:
		return v, true
	case json.Number:
		n, err := v.Int64()
		return uint64(n), err == nil
	}
	return 0, false
}

// halt records why the follower cannot be shipped to (once per cause).
func (sp *shipper) halt(why string) {
	if old := sp.halted.Swap(&why); old == nil {
		sp.haltedAt.Store(time.Now().UnixMilli())
		sp.sr.r.followersHalted.Add(1)
		sp.sr.r.s.log.Warn("replication to a follower halted", "stream", sp.sr.ref.name, "shard", sp.sr.ref.shard,
			"follower", sp.node, "reason", why)
	}
}

// unhalt clears a halt.
func (sp *shipper) unhalt() {
	if sp.halted.Swap(nil) != nil {
		sp.sr.r.followersHalted.Add(-1)
	}
}

// sleep waits d or until the shipper stops; false when it stopped.
func (sp *shipper) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-sp.ctx.Done():
		return false
	}
}

// viewBehind reports a follower's refusal because its view does not know
// the caller's generation yet (it fetches its view when it answers so).
func viewBehind(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Detail[wire.DetailReason] == core.ReasonNotReady
}

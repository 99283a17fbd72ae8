package broker

import (
	"sync"

	"github.com/felixmq/felix/wire"
)

// Holding a shard's publishes while it is handed off (handoff.go). Every
// publish a broker in a cluster makes on a durable stream shard it leads
// passes its shard's gate: it enters before it claims its offsets and
// leaves once it has been answered. A handoff closes the gate: the
// publishes behind it are parked in order (they wait, they are not
// refused), and the handoff waits until every publish already past the
// gate has been answered, so the leader's log no longer grows and its
// acknowledgements are final. Opening the gate resumes the parked ones in
// order, each routed again: forwarded to the new owner after a handoff,
// claimed here after one that failed. A forwarded publish to the shard
// passes the gate too (it is parked while the gate is closed), so the
// parked publishes reach the new owner before later ones.
//
// The memory parked publishes hold is bounded by what admitted them: the
// lane's depth and the byte budgets.

// handoffGates are the gates of the shards with publishes in flight or a
// handoff under way. The zero value is ready.
type handoffGates struct {
	mu sync.Mutex
	m  map[shardRef]*handoffGate // guarded by mu
}

// handoffGate is one shard's gate; its fields are guarded by
// handoffGates.mu.
type handoffGate struct {
	// closed: a handoff holds the shard's publishes.
	closed bool
	// active counts the publishes past the gate not yet answered.
	// Invariant: active >= 0; a gate with active == 0 that is not closed
	// is removed from the map.
	active int
	// idle, while closed, is closed once active is 0.
	idle chan struct{}
	// parked are the held publishes' resumptions, in arrival order. Each
	// is called once with nil, to route the publish again, or with the
	// refusal to answer it with.
	parked []func(refuse *wire.Error)
}

// enter lets a publish to ref through, counting it until leave, and
// reports true; while a handoff holds ref it parks resume instead and
// reports false.
func (gs *handoffGates) enter(ref shardRef, resume func(*wire.Error)) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.m[ref]
	if g != nil && g.closed {
		g.parked = append(g.parked, resume)
		return false
	}
	gs.enterLocked(ref, g)
	return true
}

// enterNow counts a resumed publish through ref's gate, closed or not.
func (gs *handoffGates) enterNow(ref shardRef) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.enterLocked(ref, gs.m[ref])
}

func (gs *handoffGates) enterLocked(ref shardRef, g *handoffGate) {
	if g == nil {
		if gs.m == nil {
			gs.m = map[shardRef]*handoffGate{}
		}
		g = &handoffGate{}
		gs.m[ref] = g
	}
	g.active++
}

// parkIfHeld parks resume when a handoff holds ref and reports whether
// it did (a forwarded publish: nothing to count).
func (gs *handoffGates) parkIfHeld(ref shardRef, resume func(*wire.Error)) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.m[ref]; g != nil && g.closed {
		g.parked = append(g.parked, resume)
		return true
	}
	return false
}

// leave is a publish's answer: it no longer counts at ref's gate.
func (gs *handoffGates) leave(ref shardRef) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.m[ref]
	if g == nil || g.active == 0 {
		panic("broker: a publish left a shard's handoff gate it had not entered")
	}
	g.active--
	if g.active > 0 {
		return
	}
	if !g.closed {
		delete(gs.m, ref)
		return
	}
	if g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// hold closes ref's gate and returns a channel closed once every publish
// past it has been answered.
func (gs *handoffGates) hold(ref shardRef) <-chan struct{} {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.m == nil {
		gs.m = map[shardRef]*handoffGate{}
	}
	g := gs.m[ref]
	if g == nil {
		g = &handoffGate{}
		gs.m[ref] = g
	}
	g.closed = true
	idle := make(chan struct{})
	if g.active == 0 {
		close(idle)
	} else {
		g.idle = idle
	}
	return idle
}

// release resumes ref's parked publishes in order (refusing each with
// refuse when it is set), then opens its gate, and returns how many it
// resumed. Publishes that arrive while it resumes are parked behind and
// resumed in turn, so none overtakes one parked before it.
func (gs *handoffGates) release(ref shardRef, refuse *wire.Error) int {
	n := 0
	for {
		gs.mu.Lock()
		g := gs.m[ref]
		if g == nil {
			gs.mu.Unlock()
			return n
		}
		parked := g.parked
		g.parked = nil
		if len(parked) == 0 {
			g.closed, g.idle = false, nil
			if g.active == 0 {
				delete(gs.m, ref)
			}
			gs.mu.Unlock()
			return n
		}
		gs.mu.Unlock()
		for _, resume := range parked {
			resume(refuse)
		}
		n += len(parked)
	}
}

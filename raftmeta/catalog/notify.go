package catalog

import "github.com/felixmq/felix/wire"

// PlacementInputsChanged returns a channel that receives (one slot,
// coalescing) whenever this member applies a command that may change
// placement's input: a broker registered, marked down or deregistered, a
// heartbeat reporting silent leaders, or
// a stream, cache, namespace or tenant written or deleted. The signal is
// sent while the command is applied, before its transaction commits (and
// also for a command that is then refused), so a reader that wants to see
// the change reads after a barrier; a spurious signal costs one pass.
// Every call returns the same channel.
func (c *Catalog) PlacementInputsChanged() <-chan struct{} {
	ch := make(chan struct{}, 1)
	c.inputsC.CompareAndSwap(nil, &ch)
	return *c.inputsC.Load()
}

// notifyPlacementInputs signals PlacementInputsChanged's channel, if
// anyone asked for it, without ever blocking the apply.
func (c *Catalog) notifyPlacementInputs(cmd catalogCmd) {
	ch := c.inputsC.Load()
	if ch == nil || !placementInput(cmd) {
		return
	}
	select {
	case *ch <- struct{}{}:
	default:
	}
}

// placementInput reports whether cmd may change what placement reads.
func placementInput(cmd catalogCmd) bool {
	switch cmd.Op {
	case opRegisterBroker, opMarkBrokerDown, opDeregisterBroker, opBatch, opImport:
		return true
	case opHeartbeatBroker:
		// A follower reporting a silent leader (the Quorum fast path).
		return cmd.Broker != nil && len(cmd.Broker.Suspects) > 0
	case opWrite, opDelete:
		return cmd.Kind != wire.KindRevocations
	}
	return false
}

// ClusterChanged returns a channel that is closed once this member has
// committed a command that may change what a broker routes by (a
// broker registered, heartbeating, marked down or deregistered; a
// placement pass; an import or a snapshot restored). Take the channel
// before reading the state it guards: a change committed after the read
// closes it. A spurious close costs the waiter one read.
func (c *Catalog) ClusterChanged() <-chan struct{} {
	if ch := c.viewC.Load(); ch != nil {
		return *ch
	}
	ch := make(chan struct{})
	if c.viewC.CompareAndSwap(nil, &ch) {
		return ch
	}
	return *c.viewC.Load()
}

// broadcastClusterChanged closes ClusterChanged's channel and puts a new
// one in its place.
func (c *Catalog) broadcastClusterChanged() {
	ch := make(chan struct{})
	if old := c.viewC.Swap(&ch); old != nil {
		close(*old)
	}
}

// viewInput reports whether cmd may change the cluster view: the broker
// registry (a heartbeat may bring a broker back to live) or the
// placement.
func viewInput(cmd catalogCmd) bool {
	switch cmd.Op {
	case opRegisterBroker, opHeartbeatBroker, opMarkBrokerDown, opDeregisterBroker, opApplyPlacement,
		opBatch, opImport, opBootstrap:
		return true
	}
	return false
}

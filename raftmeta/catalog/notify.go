package catalog

import "github.com/felixmq/felix/wire"

// PlacementInputsChanged returns a channel that receives (one slot,
// coalescing) whenever this member applies a command that may change
// placement's input: a broker registered, marked down or deregistered, or
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
	case opWrite, opDelete:
		return cmd.Kind != wire.KindRevocations
	}
	return false
}

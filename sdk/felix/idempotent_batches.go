package felix

import "bytes"

// maxFailedCalls bounds the failed PublishBatches calls a producer keeps
// for a caller to make again; past it the oldest is forgotten (making it
// again then sends every batch anew).
const maxFailedCalls = 16

// batchesCall is a PublishBatches call that failed, kept so that the same
// call made again sends nothing twice: what each of its batches became.
// A batch answered with an offset landed; one handed over and not yet
// answered to the caller is still going out under its sequence (the
// producer re-sends it itself until it lands) and is waited for; one
// refused (*PublishRefusedError) or never handed over was not written
// and is sent when the call is made again; one that failed otherwise (in
// doubt under a width that has gone, abandoned, the producer closed)
// fails the call again with the same error rather than risk a second
// copy.
type batchesCall struct {
	name  string // "ns/stream"
	slots []batchSlot
}

type slotState uint8

const (
	slotUnsent slotState = iota
	slotPending
	slotLanded
	slotRefused
	slotFailed
)

// batchSlot is one batch of a call.
type batchSlot struct {
	state    slotState
	payloads [][]byte // the batch's own copy, compared with a call made again
	job      *idemJob // pending only
	off      uint64   // landed only
	err      error    // refused and failed
}

func newBatchesCall(name string, n int) *batchesCall {
	return &batchesCall{name: name, slots: make([]batchSlot, n)}
}

// ownPayloads copies a batch the producer keeps.
func ownPayloads(b [][]byte) [][]byte {
	own := make([][]byte, len(b))
	for i, pl := range b {
		own[i] = bytes.Clone(pl)
	}
	return own
}

// same reports whether batches are the call's, batch for batch and byte
// for byte.
func (c *batchesCall) same(name string, batches [][][]byte) bool {
	if c.name != name || len(c.slots) != len(batches) {
		return false
	}
	for i, b := range batches {
		kept := c.slots[i].payloads
		if len(kept) != len(b) {
			return false
		}
		for k := range b {
			if !bytes.Equal(kept[k], b[k]) {
				return false
			}
		}
	}
	return true
}

// takeFailedCall removes and returns the failed call that batches on name
// repeat, or nil.
func (p *IdempotentProducer) takeFailedCall(name string, batches [][][]byte) *batchesCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.failedCalls {
		if c.same(name, batches) {
			p.failedCalls = append(p.failedCalls[:i], p.failedCalls[i+1:]...)
			return c
		}
	}
	return nil
}

// keepFailedCall remembers a call that failed, forgetting the oldest past
// maxFailedCalls.
func (p *IdempotentProducer) keepFailedCall(c *batchesCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failedCalls) == maxFailedCalls {
		p.failedCalls[0] = nil
		p.failedCalls = p.failedCalls[1:]
	}
	p.failedCalls = append(p.failedCalls, c)
}

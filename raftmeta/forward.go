package raftmeta

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/felixmq/felix/wire"
)

// A follower hands its proposals to the leader much as etcd does: as
// MsgProp messages, which ride the message stream to the leader with
// everything else, and the follower waits for its own apply of the entry.
// The member builds the MsgProp itself rather than letting raft forward
// it: raft stops taking proposals on a member that was removed and
// re-added (a wiped member's rejoin) until the next leader change.
//
// A forwarded proposal can be lost without a word (the leader changed or
// stopped before appending it, or the stream broke). The proposer gives up
// with an unknown outcome one election timeout after the leader changes,
// or at its own deadline; RaftStore re-proposes with the same request id.
//
// Members of earlier releases drop MsgProp from peers. A leader says it
// takes them in its answer to the stream question (acceptsHeader); to one
// that does not, proposals go in batches on POST /raft/proposals, or one
// by one on /raft/propose to a leader that predates batches.

// acceptsHeader, on the answer to GET /raft/stream, lists what a member
// takes on its streams besides raft's own replication traffic.
const (
	acceptsHeader    = "Felix-Raft-Accepts"
	acceptsProposals = "proposals"
)

// forwardedProposal reports whether m, a MsgProp from a peer, carries only
// commands in envelopes, which is all a member ever forwards. Anything else
// (a configuration change above all) is not stepped.
func forwardedProposal(m *pb.Message) bool {
	if len(m.GetEntries()) == 0 {
		return false
	}
	for _, e := range m.GetEntries() {
		if e.GetType() != pb.EntryNormal {
			return false
		}
		if _, _, err := decodeEnvelope(e.GetData()); err != nil {
			return false
		}
	}
	return true
}

// proposeOnStream queues env for lead as a MsgProp on the message stream.
// It returns false, having sent nothing, when lead has not said it takes
// them or its queue is full.
func (t *transport) proposeOnStream(lead uint64, env []byte) bool {
	p := t.peers[lead]
	if p == nil || !p.takesProposals.Load() {
		return false
	}
	m := &pb.Message{
		Type:    pb.MsgProp.Enum(),
		To:      new(lead),
		From:    new(t.n.cfg.ID),
		Entries: []*pb.Entry{{Type: pb.EntryNormal.Enum(), Data: env}},
	}
	select {
	case p.queue <- m:
		return true
	default:
		return false
	}
}

const (
	maxForwardInflight = 4   // batches a member has in flight at once
	maxForwardBatch    = 256 // envelopes per batch
)

// forwardReq is one envelope waiting to be handed to lead.
type forwardReq struct {
	lead uint64
	env  []byte
	done chan error // buffered; receives exactly one outcome
}

// forwarder queues envelopes and runs up to maxForwardInflight senders.
type forwarder struct {
	t *transport

	mu       sync.Mutex
	queue    []*forwardReq // bounded by maxPending: every caller holds a proposal slot
	inflight int
	legacy   map[uint64]time.Time // leaders that answered 404 to /raft/proposals: one by one until then
	closed   bool
	wg       sync.WaitGroup // senders; added to only under mu while !closed
}

// close waits for the senders (their requests end with the transport's
// context); later calls are refused.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
}

// proposalsAnswer is the leader's reply to a batch: the first Taken
// envelopes are in its raft log; the next one failed with Error (when set),
// and the rest were not tried.
type proposalsAnswer struct {
	Taken int        `json:"taken"`
	Error *errorBody `json:"error,omitempty"`
}

// forwardPropose hands an envelope to the leader, batched with whatever
// else is on its way there. Errors: errNoLeader (wrapped) when the envelope
// certainly did not reach raft; an outcome-unknown error otherwise.
func (t *transport) forwardPropose(ctx context.Context, lead uint64, env []byte) error {
	f := &t.fwd
	r := &forwardReq{lead: lead, env: env, done: make(chan error, 1)}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	f.queue = append(f.queue, r)
	start := f.inflight < maxForwardInflight
	if start {
		f.inflight++
		f.wg.Add(1)
	}
	f.mu.Unlock()
	if start {
		go f.run()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return outcomeUnknown(ctx.Err())
	}
}

// run sends batches until the queue is empty.
func (f *forwarder) run() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		batch := f.takeLocked()
		if len(batch) == 0 {
			f.inflight--
			f.mu.Unlock()
			return
		}
		legacy := time.Now().Before(f.legacy[batch[0].lead])
		f.mu.Unlock()
		if legacy {
			f.sendOneByOne(batch)
			continue
		}
		if errors.Is(f.sendBatch(batch), errNoBatchEndpoint) {
			// Asked again later, like a peer without streams: it may be
			// upgraded meanwhile.
			f.mu.Lock()
			if f.legacy == nil {
				f.legacy = map[uint64]time.Time{}
			}
			f.legacy[batch[0].lead] = time.Now().Add(recheckStream)
			f.mu.Unlock()
			f.sendOneByOne(batch)
		}
	}
}

// takeLocked removes up to maxForwardBatch requests for the leader of the
// oldest one, keeping the others in order.
func (f *forwarder) takeLocked() []*forwardReq {
	if len(f.queue) == 0 {
		return nil
	}
	lead := f.queue[0].lead
	var batch []*forwardReq
	rest := f.queue[:0]
	for _, r := range f.queue {
		if r.lead == lead && len(batch) < maxForwardBatch {
			batch = append(batch, r)
		} else {
			rest = append(rest, r)
		}
	}
	clear(f.queue[len(rest):])
	f.queue = rest
	return batch
}

var errNoBatchEndpoint = errors.New("raftmeta: leader has no /raft/proposals")

// sendBatch posts batch and answers every request in it, except when the
// leader lacks the endpoint (errNoBatchEndpoint: nothing was taken and
// nothing answered).
func (f *forwarder) sendBatch(batch []*forwardReq) error {
	t := f.t
	ctx, cancel := context.WithTimeout(t.ctx, t.peerTimeout())
	defer cancel()
	resp, err := t.do(ctx, batch[0].lead, http.MethodPost, "/raft/proposals", bytes.NewReader(encodeProposals(batch)))
	var ans proposalsAnswer
	if err == nil {
		if resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return errNoBatchEndpoint
		}
		if resp.StatusCode != http.StatusOK {
			err = drainResponse(resp, http.StatusOK)
		} else {
			err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ans)
			resp.Body.Close()
		}
	}
	if err != nil {
		// The whole batch shares the request's fate.
		for _, r := range batch {
			r.done <- forwardOutcome(ctx, err)
		}
		return nil
	}
	for i, r := range batch {
		switch {
		case i < ans.Taken:
			r.done <- nil
		case i == ans.Taken && ans.Error != nil:
			r.done <- forwardOutcome(ctx, ans.Error.wireError())
		default:
			r.done <- fmt.Errorf("%w: an earlier proposal of the batch failed", errNoLeader)
		}
	}
	return nil
}

// sendOneByOne hands each envelope over on its own, for a leader that
// predates /raft/proposals.
func (f *forwarder) sendOneByOne(batch []*forwardReq) {
	t := f.t
	for _, r := range batch {
		ctx, cancel := context.WithTimeout(t.ctx, t.peerTimeout())
		resp, err := t.do(ctx, r.lead, http.MethodPost, "/raft/propose", bytes.NewReader(r.env))
		if err == nil {
			err = drainResponse(resp, http.StatusNoContent)
		}
		if err != nil {
			r.done <- forwardOutcome(ctx, err)
		} else {
			r.done <- nil
		}
		cancel()
	}
}

// forwardOutcome classifies a failed hand-over: certainly not taken
// (errNoLeader, so the caller retries at once) or outcome unknown.
func forwardOutcome(ctx context.Context, err error) error {
	switch {
	case isNotTaken(err):
		return fmt.Errorf("%w: %v", errNoLeader, err)
	case ctx.Err() != nil:
		return outcomeUnknown(ctx.Err())
	default:
		return outcomeUnknown(err)
	}
}

// encodeProposals frames envelopes as uvarint length + envelope each.
func encodeProposals(batch []*forwardReq) []byte {
	var out []byte
	for _, r := range batch {
		out = binary.AppendUvarint(out, uint64(len(r.env)))
		out = append(out, r.env...)
	}
	return out
}

// decodeProposals is encodeProposals' inverse; every envelope must decode.
// The envelopes alias b.
func decodeProposals(b []byte) ([][]byte, error) {
	var envs [][]byte
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, errors.New("raftmeta: truncated proposal batch")
		}
		env := b[n : n+int(l)]
		if _, _, err := decodeEnvelope(env); err != nil {
			return nil, err
		}
		envs = append(envs, env)
		b = b[n+int(l):]
	}
	return envs, nil
}

// handleProposals proposes a batch of envelopes in order and reports how
// many raft took before the first failure.
func (t *transport) handleProposals(w http.ResponseWriter, r *http.Request) {
	body, ok := t.readPeerBody(w, r, "proposals")
	if !ok {
		return
	}
	envs, err := decodeProposals(body)
	if err != nil {
		writeError(w, wire.NewError(wire.CodeInvalidRequest, "%v", err))
		return
	}
	var ans proposalsAnswer
	for _, env := range envs {
		err := t.proposeAsLeader(r.Context(), env)
		if err != nil {
			eb := errorBodyOf(err)
			ans.Error = &eb
			break
		}
		ans.Taken++
	}
	writeJSON(w, http.StatusOK, ans)
}

// proposeAsLeader hands env to this member's raft if it leads; a dropped
// proposal reads as "not the leader".
func (t *transport) proposeAsLeader(ctx context.Context, env []byte) error {
	if t.n.leader() != t.n.cfg.ID {
		return notLeaderError(t.n.leader())
	}
	err := t.n.rn.Propose(ctx, env)
	if errors.Is(err, raft.ErrProposalDropped) {
		return notLeaderError(t.n.leader())
	}
	return err
}

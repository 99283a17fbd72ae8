package raftmeta

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/wire"
)

func (t *transport) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /raft/message", t.handleMessage)
	mux.HandleFunc("POST /raft/stream", t.handleStream)
	mux.HandleFunc("GET /raft/stream", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(acceptsHeader, acceptsProposals)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /raft/snapshot", t.handleSnapshot)
	mux.HandleFunc("POST /raft/propose", t.handlePropose)
	mux.HandleFunc("POST /raft/proposals", t.handleProposals)
	mux.HandleFunc("POST /raft/readindex", t.handleReadIndex)
	mux.HandleFunc("POST /raft/join", t.handleJoin)
	mux.HandleFunc("GET /raft/status", t.handleStatus)
	return mux
}

// errorBody is the JSON a peer endpoint answers with on failure.
type errorBody struct {
	Code    wire.Code       `json:"code"`
	Message string          `json:"message"`
	Retry   wire.RetryClass `json:"retry"`
	Leader  uint64          `json:"leader,omitempty"`
}

func notLeaderError(lead uint64) *wire.Error {
	return wire.NewError(wire.CodeNotLeader, "not the raft leader").WithDetail("leader", lead)
}

// errorBodyOf is err as a peer endpoint reports it.
func errorBodyOf(err error) errorBody {
	var we *wire.Error
	if !errors.As(err, &we) {
		we = wire.NewError(wire.CodeInternal, "%v", err)
	}
	body := errorBody{Code: we.Code, Message: we.Message, Retry: we.Retry}
	if l, ok := we.Detail["leader"].(uint64); ok {
		body.Leader = l
	}
	return body
}

// wireError is the error a peer reported, typed again.
func (eb *errorBody) wireError() *wire.Error {
	e := wire.ErrorFromFields(eb.Code, eb.Retry, eb.Message, nil)
	if eb.Leader != 0 {
		e = e.WithDetail("leader", eb.Leader)
	}
	return e
}

func writeError(w http.ResponseWriter, err error) {
	body := errorBodyOf(err)
	status := http.StatusInternalServerError
	switch body.Code {
	case wire.CodeNotLeader, wire.CodeShardUnavailable:
		status = http.StatusServiceUnavailable
	case wire.CodeInvalidRequest:
		status = http.StatusBadRequest
	case wire.CodeOverloaded:
		status = http.StatusTooManyRequests
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the peer sees a short body if this fails
}

// requireStarted answers 503 while the raft node is not running yet.
func (t *transport) requireStarted(w http.ResponseWriter) bool {
	if t.n.started() {
		return true
	}
	writeError(w, wire.NewError(wire.CodeShardUnavailable, "raft member %d is starting", t.n.cfg.ID))
	return false
}

// readPeerBody reads a bounded request body once the node runs,
// answering 503 or 400 when it cannot.
func (t *transport) readPeerBody(w http.ResponseWriter, r *http.Request, what string) ([]byte, bool) {
	if !t.requireStarted(w) {
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, wire.NewError(wire.CodeInvalidRequest, "read %s: %v", what, err))
		return nil, false
	}
	return body, true
}

// stepBatch steps every message of an encoded batch into raft.
func (t *transport) stepBatch(ctx context.Context, b []byte) error {
	msgs, err := decodeBatch(b)
	if err != nil {
		return wire.NewError(wire.CodeInvalidRequest, "%v", err)
	}
	for _, m := range msgs {
		t.n.receive(ctx, m)
	}
	return nil
}

func (t *transport) handleMessage(w http.ResponseWriter, r *http.Request) {
	body, ok := t.readPeerBody(w, r, "batch")
	if !ok {
		return
	}
	if err := t.stepBatch(r.Context(), body); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (t *transport) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	if !t.requireStarted(w) {
		return
	}
	m, err := readSnapshotMessage(bufio.NewReader(http.MaxBytesReader(w, r.Body, maxHeaderBytes+maxSnapshotBytes+16)))
	if err != nil {
		writeError(w, wire.NewError(wire.CodeInvalidRequest, "%v", err))
		return
	}
	t.n.receive(r.Context(), m)
	w.WriteHeader(http.StatusNoContent)
}

func readSnapshotMessage(r *bufio.Reader) (*pb.Message, error) {
	l, err := binary.ReadUvarint(r)
	if err != nil || l > maxHeaderBytes {
		return nil, fmt.Errorf("bad snapshot header length")
	}
	hb := make([]byte, l)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, fmt.Errorf("short snapshot header: %w", err)
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(hb, m); err != nil {
		return nil, fmt.Errorf("bad snapshot header: %w", err)
	}
	if m.GetType() != pb.MsgSnap || m.Snapshot == nil {
		return nil, errors.New("snapshot endpoint got a non-snapshot message")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read snapshot data: %w", err)
	}
	m.Snapshot.Data = data
	return m, nil
}

// receive steps one message from a peer into raft, after the guards that
// keep bad or dangerous input away from it.
func (n *Node) receive(ctx context.Context, m *pb.Message) {
	if m.GetTo() != n.cfg.ID || raft.IsLocalMsg(m.GetType()) {
		return
	}
	if m.GetType() == pb.MsgProp && !forwardedProposal(m) {
		n.log.Debug("refused a forwarded proposal that is not commands in envelopes", "from", m.GetFrom())
		return
	}
	n.mu.Lock()
	catchingUp := n.catchingUp
	leading := n.role == raft.StateLeader
	switch m.GetType() {
	case pb.MsgApp, pb.MsgHeartbeat, pb.MsgSnap:
		n.leaderContact = time.Now()
	}
	n.mu.Unlock()
	if catchingUp && (m.GetType() == pb.MsgVote || m.GetType() == pb.MsgPreVote) {
		return // a member rebuilding a wiped log must not vote
	}
	if m.GetType() == pb.MsgHeartbeat {
		// A leader that remembers more of our log than we hold (we lost
		// it) would otherwise make raft panic; committing less is safe.
		if last, _ := n.storage.LastIndex(); m.GetCommit() > last {
			m.Commit = new(last)
		}
	}
	if m.GetType() == pb.MsgProp {
		// raft takes a proposal only while it knows a leader, and until
		// then Step waits. Waiting here would hold up every later message
		// on this peer's stream, the new leader's appends and heartbeats
		// among them: a leader frozen while followers forwarded to it,
		// then thawed after losing office, would never hear of its
		// successor. So a forwarded proposal is stepped only while this
		// member leads, and never waits long; one dropped is given up at
		// its proposer, which proposes it again (forward.go).
		if !leading {
			n.met.messagesDropped.Inc()
			n.log.Debug("dropped a forwarded proposal: this member does not lead", "from", m.GetFrom())
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.TickInterval)
		defer cancel()
	}
	if err := n.rn.Step(ctx, m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		n.log.Debug("raft step failed", "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
	}
}

func (t *transport) handlePropose(w http.ResponseWriter, r *http.Request) {
	env, ok := t.readPeerBody(w, r, "proposal")
	if !ok {
		return
	}
	if _, _, err := decodeEnvelope(env); err != nil {
		writeError(w, wire.NewError(wire.CodeInvalidRequest, "%v", err))
		return
	}
	if err := t.proposeAsLeader(r.Context(), env); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (t *transport) handleReadIndex(w http.ResponseWriter, r *http.Request) {
	if !t.requireStarted(w) {
		return
	}
	if t.n.leader() != t.n.cfg.ID {
		writeError(w, notLeaderError(t.n.leader()))
		return
	}
	idx, err := t.n.localReadIndex(r.Context())
	if errors.Is(err, errNoLeader) {
		err = notLeaderError(t.n.leader())
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"index": idx})
}

type joinRequest struct {
	ID    uint64 `json:"id"`
	Token uint64 `json:"token"`
}

func (t *transport) handleJoin(w http.ResponseWriter, r *http.Request) {
	if !t.requireStarted(w) {
		return
	}
	var req joinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil || req.Token == 0 {
		writeError(w, wire.NewError(wire.CodeInvalidRequest, "bad join request"))
		return
	}
	idx, err := t.n.handleJoin(r.Context(), req.ID, req.Token)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"index": idx})
}

func (t *transport) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, t.n.Status())
}

// do sends one request to member id.
func (t *transport) do(ctx context.Context, id uint64, method, path string, body io.Reader) (*http.Response, error) {
	base, ok := t.n.cfg.Peers[id]
	if !ok {
		return nil, fmt.Errorf("raftmeta: unknown member %d", id)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, body)
	if err != nil {
		return nil, err
	}
	return t.client.Do(req)
}

// drainResponse checks the status and consumes the body so the connection
// is reused. A failure answer becomes a *wire.Error.
func drainResponse(resp *http.Response, want int) error {
	defer resp.Body.Close()
	if resp.StatusCode == want {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // best effort, for connection reuse
		return nil
	}
	var eb errorBody
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&eb); err != nil || eb.Code == "" {
		return wire.NewError(wire.CodeInternal, "peer answered HTTP %d", resp.StatusCode)
	}
	return eb.wireError()
}

// isNotTaken reports whether a failed call certainly did not reach the
// peer's raft: it could not connect, or the peer said it is not the leader
// (or not started).
func isNotTaken(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var we *wire.Error
	return errors.As(err, &we) && (we.Code == wire.CodeNotLeader || we.Code == wire.CodeShardUnavailable)
}

// readIndex asks the leader for its confirmed commit index.
func (t *transport) readIndex(ctx context.Context, lead uint64) (uint64, error) {
	var out struct{ Index uint64 }
	err := t.call(ctx, lead, http.MethodPost, "/raft/readindex", nil, &out)
	if err != nil && isNotTaken(err) {
		return 0, fmt.Errorf("%w: %v", errNoLeader, err)
	}
	return out.Index, err
}

// join asks a member (the leader) to re-add us as a learner.
func (t *transport) join(ctx context.Context, to, id, token uint64) (uint64, error) {
	b, _ := json.Marshal(joinRequest{ID: id, Token: token}) // plain struct, cannot fail
	var out struct{ Index uint64 }
	err := t.call(ctx, to, http.MethodPost, "/raft/join", strings.NewReader(string(b)), &out)
	return out.Index, err
}

// status fetches a peer's Status.
func (t *transport) status(ctx context.Context, id uint64) (Status, error) {
	var st Status
	err := t.call(ctx, id, http.MethodGet, "/raft/status", nil, &st)
	return st, err
}

// call does a request and decodes a JSON 200 answer into out.
func (t *transport) call(ctx context.Context, id uint64, method, path string, body io.Reader, out any) error {
	resp, err := t.do(ctx, id, method, path, body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return drainResponse(resp, http.StatusOK)
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
}

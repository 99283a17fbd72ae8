package raftmeta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Transport bounds.
const (
	peerQueueLen     = 4096        // messages queued per peer; overflow drops and reports unreachable
	maxBatchMessages = 256         // messages per POST /raft/message
	maxBatchBytes    = 4 << 20     // soft byte bound of one outgoing batch
	maxBodyBytes     = 64 << 20    // hard bound of a received message batch or proposal
	maxHeaderBytes   = 1 << 20     // bound of a snapshot message's header
	attemptFloor     = time.Second // least time a request to a peer gets
)

// transport carries raft messages and the forwarding calls between
// members over HTTP (HTTP/2 when TLS is configured).
type transport struct {
	n      *Node
	ln     net.Listener
	srv    *http.Server
	client *http.Client
	peers  map[uint64]*peer // every member but this one; fixed at start

	joinMu sync.Mutex // serializes join handling on the leader
	fwd    forwarder  // batches proposals handed to the leader

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// peer is one remote member: a bounded queue drained by one sender.
type peer struct {
	id       uint64
	url      string
	queue    chan *pb.Message
	snapBusy atomic.Bool // a snapshot is being streamed to this peer
	// takesProposals: the peer's answer to the stream question said it
	// steps proposals forwarded in raft messages (MsgProp).
	takesProposals atomic.Bool

	// Owned by the peer's sender.
	stream        *peerStream // open message stream, if any
	noStreamUntil time.Time   // the peer has no streams: POST until then
}

func newTransport(n *Node) (*transport, error) {
	ln := n.cfg.Listener
	if ln == nil {
		u, err := url.Parse(n.cfg.Peers[n.cfg.ID])
		if err != nil {
			return nil, err
		}
		if ln, err = net.Listen("tcp", u.Host); err != nil {
			return nil, fmt.Errorf("raftmeta: peer listener: %w", err)
		}
	}
	t := &transport{n: n, ln: ln, peers: map[uint64]*peer{}}
	t.fwd.t = t
	t.ctx, t.cancel = context.WithCancel(n.ctx)
	ht := &http.Transport{ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	if n.cfg.TLS != nil {
		ht.TLSClientConfig = n.cfg.TLS.Clone()
	}
	t.client = &http.Client{Transport: ht}
	t.srv = &http.Server{Handler: t.routes(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	for id, u := range n.cfg.Peers {
		if id == n.cfg.ID {
			continue
		}
		p := &peer{id: id, url: u, queue: make(chan *pb.Message, peerQueueLen)}
		t.peers[id] = p
		t.wg.Add(1)
		go t.sendLoop(p)
	}
	t.wg.Add(1)
	go t.serve()
	return t, nil
}

func (t *transport) serve() {
	defer t.wg.Done()
	var err error
	if t.n.cfg.TLS != nil {
		t.srv.TLSConfig = t.n.cfg.TLS.Clone()
		err = t.srv.ServeTLS(t.ln, "", "")
	} else {
		err = t.srv.Serve(t.ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.n.log.Error("raft peer listener stopped", "err", err)
	}
}

func (t *transport) addr() string { return t.ln.Addr().String() }

// peerTimeout bounds one request to a peer (or one write to its stream):
// five election timeouts, at least attemptFloor.
func (t *transport) peerTimeout() time.Duration {
	return max(5*t.n.electionTimeout(), attemptFloor)
}

// close stops the listener, waits for in-flight handlers (they end because
// the node's context is cancelled first) and for every sender.
func (t *transport) close() {
	t.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.srv.Shutdown(ctx); err != nil {
		t.srv.Close()
	}
	t.wg.Wait()
	t.fwd.close()
	t.client.CloseIdleConnections()
}

// send queues a Ready's messages; it never blocks. A full queue drops the
// message and tells raft the peer is unreachable (raft retries).
func (t *transport) send(msgs []*pb.Message) {
	for _, m := range msgs {
		p := t.peers[m.GetTo()]
		if p == nil {
			continue
		}
		if m.GetType() == pb.MsgSnap {
			t.startSnapshot(p, m)
			continue
		}
		select {
		case p.queue <- m:
		default:
			t.n.met.messagesDropped.Inc()
			t.n.rn.ReportUnreachable(p.id)
		}
	}
}

// sendLoop is the one sender for p: it posts batches and backs off
// exponentially (one tick up to one election timeout) after a failure,
// dropping what was queued meanwhile.
func (t *transport) sendLoop(p *peer) {
	defer t.wg.Done()
	defer p.closeStream()
	var backoff time.Duration
	for {
		var first *pb.Message
		select {
		case <-t.ctx.Done():
			return
		case first = <-p.queue:
		}
		batch := t.collect(p, first)
		err := t.sendMessages(p, batch)
		if err == nil {
			backoff = 0
			continue
		}
		t.n.log.Debug("raft send failed", "to", p.id, "err", err)
		t.n.rn.ReportUnreachable(p.id)
		backoff = min(max(2*backoff, t.n.cfg.TickInterval), t.n.electionTimeout())
		if !t.sleep(backoff) {
			return
		}
		t.drain(p)
	}
}

// collect gathers first and whatever else is queued, within the bounds.
func (t *transport) collect(p *peer, first *pb.Message) []*pb.Message {
	batch := []*pb.Message{first}
	size := proto.Size(first)
	for len(batch) < maxBatchMessages && size < maxBatchBytes {
		select {
		case m := <-p.queue:
			batch = append(batch, m)
			size += proto.Size(m)
		default:
			return batch
		}
	}
	return batch
}

func (t *transport) drain(p *peer) {
	for {
		select {
		case <-p.queue:
			t.n.met.messagesDropped.Inc()
		default:
			return
		}
	}
}

func (t *transport) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-t.ctx.Done():
		return false
	}
}

// sendMessages sends a batch on p's stream, or posts it to a peer that
// has no stream endpoint.
func (t *transport) sendMessages(p *peer, batch []*pb.Message) error {
	body, err := encodeBatch(batch)
	if err != nil {
		return err
	}
	if err := t.streamBatch(p, body); !errors.Is(err, errNoStreamEndpoint) {
		return err
	}
	return t.postMessages(p, body)
}

func (t *transport) postMessages(p *peer, body []byte) error {
	ctx, cancel := context.WithTimeout(t.ctx, t.peerTimeout())
	defer cancel()
	resp, err := t.do(ctx, p.id, http.MethodPost, "/raft/message", bytes.NewReader(body))
	if err != nil {
		return err
	}
	return drainResponse(resp, http.StatusNoContent)
}

// startSnapshot streams a snapshot to p in its own goroutine (one at a time
// per peer) and reports the outcome to raft.
func (t *transport) startSnapshot(p *peer, m *pb.Message) {
	if !p.snapBusy.CompareAndSwap(false, true) {
		t.n.rn.ReportSnapshot(p.id, raft.SnapshotFailure)
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer p.snapBusy.Store(false)
		if err := t.postSnapshot(p, m); err != nil {
			t.n.log.Warn("sending snapshot failed", "to", p.id, "err", err)
			t.n.rn.ReportUnreachable(p.id)
			t.n.rn.ReportSnapshot(p.id, raft.SnapshotFailure)
			return
		}
		t.n.rn.ReportSnapshot(p.id, raft.SnapshotFinish)
	}()
}

// postSnapshot sends the message without its data as a length-prefixed
// header, then the snapshot data as the rest of the body.
func (t *transport) postSnapshot(p *peer, m *pb.Message) error {
	hdr := proto.Clone(m).(*pb.Message)
	data := m.GetSnapshot().GetData()
	if hdr.Snapshot != nil {
		hdr.Snapshot.Data = nil
	}
	hb, err := proto.Marshal(hdr)
	if err != nil {
		return err
	}
	prefix := binary.AppendUvarint(nil, uint64(len(hb)))
	body := io.MultiReader(bytes.NewReader(prefix), bytes.NewReader(hb), bytes.NewReader(data))
	ctx, cancel := context.WithTimeout(t.ctx, 5*time.Minute)
	defer cancel()
	resp, err := t.do(ctx, p.id, http.MethodPost, "/raft/snapshot", body)
	if err != nil {
		return err
	}
	return drainResponse(resp, http.StatusNoContent)
}

// encodeBatch frames messages as uvarint length + protobuf each.
func encodeBatch(msgs []*pb.Message) ([]byte, error) {
	var out []byte
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
	}
	return out, nil
}

// decodeBatch is encodeBatch's inverse; it checks every length first.
func decodeBatch(b []byte) ([]*pb.Message, error) {
	var out []*pb.Message
	for len(b) > 0 {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) {
			return nil, errors.New("raftmeta: bad message batch framing")
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b[w:w+int(l)], m); err != nil {
			return nil, fmt.Errorf("raftmeta: bad message: %w", err)
		}
		out = append(out, m)
		b = b[w+int(l):]
	}
	return out, nil
}

package raftmeta

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/felixmq/felix/wire"
)

// Raft messages to a peer travel on one long-lived POST /raft/stream whose
// body is a sequence of batches, each a uvarint length and an encodeBatch
// payload. A POST per batch cost an HTTP request and response for every
// Ready and every peer, which was most of the transport's CPU.
//
// Before opening a stream the sender asks GET /raft/stream. An older
// member answers 404, and batches go to it on POST /raft/message as
// before; it is asked again a minute later (it may have been upgraded).
// The question has to come first: an HTTP/1.1 server that rejects a
// request without reading its body first reads (and drops) up to 256 KiB
// of it, so a 404 to the stream itself would arrive only after that much
// of the log had been lost.

// recheckStream is how long a peer without streams (or a leader without
// batched proposals) is sent one request per batch (or proposal) before
// it is asked again.
const recheckStream = time.Minute

// peerStream is the open stream to one peer: batches are written to w,
// which the HTTP client copies into the request body (flushing each
// chunk); ended is closed, with err set, when the request is over.
type peerStream struct {
	w      *io.PipeWriter
	cancel context.CancelFunc // aborts the request
	ended  chan struct{}
	err    error // why the request ended
}

var errNoStreamEndpoint = errors.New("raftmeta: peer has no /raft/stream")

// openStream starts the streaming request to p. Its goroutine belongs to
// the transport's wait group (the caller, p's sender, is in it too).
func (t *transport) openStream(p *peer) *peerStream {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.ctx)
	s := &peerStream{w: pw, cancel: cancel, ended: make(chan struct{})}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(s.ended)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.url, "/")+"/raft/stream", pr)
		if err == nil {
			var resp *http.Response
			if resp, err = t.client.Do(req); err == nil {
				err = drainResponse(resp, http.StatusNoContent)
				if err == nil {
					err = errors.New("raftmeta: peer ended the stream")
				}
			}
		}
		s.err = err
		pr.CloseWithError(err)
	}()
	return s
}

// canStream asks p whether it takes streams: true on 204, false on 404 or
// 405 (an older member), an error when p did not answer. It also notes
// whether p takes proposals on them.
func (t *transport) canStream(p *peer) (bool, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.peerTimeout())
	defer cancel()
	resp, err := t.do(ctx, p.id, http.MethodGet, "/raft/stream", nil)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		p.takesProposals.Store(resp.Header.Get(acceptsHeader) == acceptsProposals)
		return true, nil
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return false, nil
	default:
		return false, fmt.Errorf("raftmeta: peer %d answered HTTP %d to GET /raft/stream", p.id, resp.StatusCode)
	}
}

// streamBatch sends batch to p on its stream, opening one when needed. It
// returns errNoStreamEndpoint when p predates streams (nothing was sent).
func (t *transport) streamBatch(p *peer, batch []byte) error {
	if p.stream == nil {
		if time.Now().Before(p.noStreamUntil) {
			return errNoStreamEndpoint
		}
		ok, err := t.canStream(p)
		if err != nil {
			return err
		}
		if !ok {
			p.noStreamUntil = time.Now().Add(recheckStream)
			return errNoStreamEndpoint
		}
		p.stream = t.openStream(p)
	}
	frame := binary.AppendUvarint(make([]byte, 0, len(batch)+binary.MaxVarintLen64), uint64(len(batch)))
	frame = append(frame, batch...)
	// A peer that stopped reading (frozen, or its network gone) must not
	// hold the sender forever: the stream is cut and raft hears the peer
	// is unreachable, as with a failed POST.
	stall := time.AfterFunc(t.peerTimeout(), p.stream.cancel)
	_, err := p.stream.w.Write(frame)
	stall.Stop()
	if err != nil {
		s := p.stream
		p.stream = nil
		p.takesProposals.Store(false) // asked again with the next stream
		<-s.ended
		return fmt.Errorf("raftmeta: stream to %d: %w (%v)", p.id, err, s.err)
	}
	return nil
}

// closeStream ends p's stream (its sender is stopping).
func (p *peer) closeStream() {
	if p.stream != nil {
		p.stream.w.Close()
		p.stream.cancel()
		p.stream = nil
		p.takesProposals.Store(false)
	}
}

// handleStream steps every message of every batch on the stream until the
// peer ends it or this member closes.
func (t *transport) handleStream(w http.ResponseWriter, r *http.Request) {
	// However the stream ends, the connection goes with it: the server
	// must not try to drain a body that has no end before answering.
	w.Header().Set("Connection", "close")
	if !t.requireStarted(w) {
		return
	}
	// Closing the member must not wait for the peer to hang up.
	rc := http.NewResponseController(w)
	stop := context.AfterFunc(t.ctx, func() { _ = rc.SetReadDeadline(time.Now()) })
	defer stop()
	br := bufio.NewReaderSize(r.Body, 64<<10)
	for {
		l, err := binary.ReadUvarint(br)
		if err != nil {
			break // the peer ended the stream, or it broke
		}
		if l > maxBodyBytes {
			writeError(w, wire.NewError(wire.CodeInvalidRequest, "stream batch of %d bytes", l))
			return
		}
		buf := make([]byte, l)
		if _, err := io.ReadFull(br, buf); err != nil {
			break
		}
		if err := t.stepBatch(r.Context(), buf); err != nil {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

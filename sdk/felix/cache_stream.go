package felix

import (
	"errors"
	"io"

	"github.com/felixmq/felix/wire"
)

// run is the writer loop: take one request, drain whatever else is queued
// (up to cacheCoalesceBytes) and send it all with one Write call. A broker
// that stops reading stalls Write under QUIC flow control; callers still
// return when their ctx ends, and the stream recovers only when it or the
// connection fails.
func (w *cacheWorker) run() {
	defer func() {
		if w.cur != nil {
			w.kill(w.cur, w.c.failure(ErrClosed))
		}
	}()
	if w.first != nil {
		w.adopt(w.first)
		w.first = nil
	}
	var buf []byte
	batch := make([]*cacheReq, 0, cacheQueueLen)
	frameLen := func(r *cacheReq) int { return len(r.frame) }
	for {
		var ok bool
		if batch, ok = takeBatch(w.c.ctx, w.reqC, batch, frameLen, cacheCoalesceBytes); !ok {
			return
		}
		buf = w.write(batch, buf[:0])
		if cap(buf) > 4*cacheCoalesceBytes {
			buf = nil
		}
		clear(batch)
	}
}

// write sends the batch's live requests on the current stream.
func (w *cacheWorker) write(batch []*cacheReq, buf []byte) []byte {
	st, err := w.stream()
	if err != nil {
		w.failUnsent(batch, w.c.failure(err))
		return buf
	}
	for _, r := range batch {
		if w.claim(r, st) {
			buf = append(buf, r.frame...)
		}
	}
	if len(buf) == 0 {
		return buf
	}
	if _, err := st.cs.s.Write(buf); err != nil {
		w.kill(st, w.c.failure(err))
	}
	return buf
}

// stream returns the live stream, opening and authenticating a new one
// when the last one died.
func (w *cacheWorker) stream() (*cacheStream, error) {
	if st := w.cur; st != nil && !closed(st.deadC) {
		return st, nil
	}
	w.cur = nil
	cs, err := w.c.openStream(w.c.ctx)
	if err != nil {
		return nil, err
	}
	if !w.adopt(cs) {
		return nil, notSent(ErrClosed)
	}
	return w.cur, nil
}

// adopt makes cs the current stream and starts its reader. It returns
// false, aborting cs, once the client is shutting down.
func (w *cacheWorker) adopt(cs *ctrlStream) bool {
	st := &cacheStream{cs: cs, deadC: make(chan struct{})}
	if !w.c.spawn(func() { w.readAnswers(st) }) {
		cs.abort()
		return false
	}
	w.cur = st
	return true
}

// readAnswers is st's reader: it hands each answer to the caller waiting
// for its request id until the stream fails, then fails everyone still
// waiting on st.
func (w *cacheWorker) readAnswers(st *cacheStream) {
	for {
		msg, err := readMessage(st.cs.fr)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("felix: the broker ended the cache stream")
			}
			w.kill(st, w.c.failure(err))
			return
		}
		if err := w.route(st, msg); err != nil {
			w.kill(st, err)
			return
		}
	}
}

// route delivers one answer. It returns an error, which ends the stream,
// for a refusal that names no request: nothing tells which caller it
// meant.
func (w *cacheWorker) route(st *cacheStream, msg wire.Message) error {
	switch m := msg.(type) {
	case *wire.CacheOK:
		w.resolve(st, m.RequestID, cacheResult{})
	case *wire.CacheValue:
		w.resolve(st, m.RequestID, cacheResult{value: m.Value, msg: m})
	case *wire.CacheConditionResult:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.CounterValue:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.StreamRecords:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.OffsetValue:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.StreamInfoOK:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.CacheKeysPage:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.TopologyView:
		if m.RequestID == nil {
			return errors.New("felix: topology_view names no request")
		}
		w.resolve(st, *m.RequestID, cacheResult{msg: m})
	case *wire.StreamShardsView:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.CacheShardsView:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.ShardOwnersView:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.ProducerInitOK: // idempotent.go
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.PublishOK: // publish_if's answers (publish_if.go)
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.PublishRefused:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.StateValue: // commit.go
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.GroupRecords: // group.go
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.GroupExtended:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.GroupDeadLetterList:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.GroupPosition:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.GroupInfo:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.GroupDeleted:
		w.resolve(st, m.RequestID, cacheResult{msg: m})
	case *wire.PublishError:
		id := m.RequestID
		return w.refuse(st, &id, brokerErrorFromWire(m.Err()))
	case *wire.NotLeader:
		return w.refuse(st, m.RequestID, notLeaderError(m))
	case *wire.SubscribeCursorError:
		return w.refuse(st, m.RequestID, cursorError(m))
	case *wire.ErrorMsg:
		return w.refuse(st, m.RequestID, brokerErrorFromWire(m.Err()))
	case *wire.Unsupported:
		return w.refuse(st, m.RequestID, unsupported(m.RequestType))
	}
	return nil
}

// refuse fails the request id names with err. A refusal naming no
// request (id nil) is returned instead, to end the stream.
func (w *cacheWorker) refuse(st *cacheStream, id *uint64, err error) error {
	if id == nil {
		return err
	}
	w.resolve(st, *id, cacheResult{err: err})
	return nil
}

package felix

import (
	"errors"
	"sync"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// Event router bounds.
const (
	routerMaxWaiting = 4096             // per map: registrations, and streams, waiting for the other side
	helloTimeout     = 10 * time.Second // an event stream must name its subscription within this
)

// eventStream is a broker-opened stream whose hello has been read.
type eventStream struct {
	rs transport.ReceiveStream
	fr *wire.FrameReader
}

// stop stops reading the stream (STOP_SENDING) with code, so the broker
// lets it go.
func (es eventStream) stop(code wire.CloseCode) { es.rs.CancelRead(transport.StreamErrorCode(code)) }

// router joins broker-opened event streams to subscriptions by id. The
// broker may open the stream before or after the client reads subscribed,
// so each side can wait in a bounded map for the other.
type router struct {
	c *Client

	mu      sync.Mutex
	ended   bool
	regs    map[uint64]eventSink   // subscribed, no stream yet
	streams map[uint64]eventStream // stream arrived, no registration yet
	order   []uint64               // arrival order of streams, for eviction (may hold stale ids)

	hook func(event string) // tests only: "stream_waiting"
}

func newRouter(c *Client) *router {
	return &router{c: c, regs: map[uint64]eventSink{}, streams: map[uint64]eventStream{}}
}

// eventSink is what waits for an event stream: a subscription or a cache
// watch.
type eventSink interface {
	streamID() uint64      // the id the stream's hello names
	attach(es eventStream) // takes the stream, for Next to read
	connectionEnded()      // the router stopped before the stream came
}

// run accepts event streams until the connection or client ends.
func (r *router) run() {
	defer r.shutdown()
	for {
		rs, err := r.c.conn.AcceptUniStream(r.c.ctx)
		if err != nil {
			return
		}
		// Each stream's hello is read on its own goroutine, so one slow
		// stream cannot hold up the ones accepted after it. The broker's
		// stream limit bounds how many there are.
		if !r.c.spawn(func() { r.accept(rs) }) { // the client is closing
			rs.CancelRead(transport.StreamErrorCode(wire.CloseNoError))
			return
		}
	}
}

// accept reads an event stream's hello and offers it to its subscription.
func (r *router) accept(rs transport.ReceiveStream) {
	id, fr, err := r.readHello(rs)
	if err != nil {
		rs.CancelRead(transport.StreamErrorCode(wire.CloseBadStream))
		return
	}
	r.offer(id, eventStream{rs: rs, fr: fr})
}

func (r *router) readHello(rs transport.ReceiveStream) (uint64, *wire.FrameReader, error) {
	_ = rs.SetReadDeadline(time.Now().Add(helloTimeout))
	defer func() { _ = rs.SetReadDeadline(time.Time{}) }()
	fr := wire.NewFrameReader(rs, r.c.cfg.MaxFrameBytes)
	msg, err := readMessage(fr)
	if err != nil {
		return 0, nil, err
	}
	h, ok := msg.(*wire.EventStreamHello)
	if !ok {
		return 0, nil, errors.New("felix: event stream did not start with event_stream_hello")
	}
	return h.SubscriptionID, fr, nil
}

// offer hands an arrived stream to its registration, or parks it.
func (r *router) offer(id uint64, es eventStream) {
	r.mu.Lock()
	if r.ended { // the connection is gone; nobody will claim the stream
		r.mu.Unlock()
		es.stop(wire.CloseNoError)
		return
	}
	if sub, ok := r.regs[id]; ok {
		delete(r.regs, id)
		r.mu.Unlock()
		sub.attach(es)
		return
	}
	if old, ok := r.streams[id]; ok { // a second stream for one id: keep the newest
		old.stop(wire.CloseEvicted)
	}
	for len(r.streams) >= routerMaxWaiting {
		r.evictOldestLocked()
	}
	r.streams[id] = es
	r.order = append(r.order, id)
	if len(r.order) > 2*len(r.streams)+64 {
		r.compactLocked()
	}
	hook := r.hook
	r.mu.Unlock()
	if hook != nil {
		hook("stream_waiting")
	}
}

func (r *router) evictOldestLocked() {
	for len(r.order) > 0 {
		id := r.order[0]
		r.order = r.order[1:]
		if es, ok := r.streams[id]; ok {
			delete(r.streams, id)
			es.stop(wire.CloseEvicted)
			return
		}
	}
}

func (r *router) compactLocked() {
	kept := r.order[:0]
	for _, id := range r.order {
		if _, ok := r.streams[id]; ok {
			kept = append(kept, id)
		}
	}
	r.order = kept
}

// register joins sub to its stream if it already arrived, or parks it.
func (r *router) register(sub eventSink) error {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return r.c.failure(ErrConnectionLost)
	}
	id := sub.streamID()
	if es, ok := r.streams[id]; ok {
		delete(r.streams, id)
		r.mu.Unlock()
		sub.attach(es)
		return nil
	}
	if len(r.regs) >= routerMaxWaiting {
		r.mu.Unlock()
		return errors.New("felix: too many subscriptions waiting for their event streams")
	}
	r.regs[id] = sub
	r.mu.Unlock()
	return nil
}

// unregister forgets a registration that never got its stream.
func (r *router) unregister(sub eventSink) {
	r.mu.Lock()
	if id := sub.streamID(); r.regs[id] == sub {
		delete(r.regs, id)
	}
	r.mu.Unlock()
}

// shutdown ends every waiting registration and drops parked streams.
func (r *router) shutdown() {
	r.mu.Lock()
	r.ended = true
	regs, streams := r.regs, r.streams
	r.regs, r.streams, r.order = map[uint64]eventSink{}, map[uint64]eventStream{}, nil
	r.mu.Unlock()
	for _, es := range streams {
		es.stop(wire.CloseNoError)
	}
	for _, sub := range regs {
		sub.connectionEnded()
	}
}

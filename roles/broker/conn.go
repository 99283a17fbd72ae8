package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// connection is one accepted QUIC connection: its stream accept loops,
// request streams (control and publish ingress), subscription and cache
// watch writers, and its publish byte budget and subscription limit.
type connection struct {
	srv    *Server
	qc     transport.Conn
	source string
	budget *semaphore.Weighted // publish bytes in flight from this connection

	ctx        context.Context // ends when the QUIC connection closes
	acceptCtx  context.Context
	stopAccept context.CancelFunc

	acceptWG sync.WaitGroup // the two accept loops
	requests tracker        // control and ingress streams being served
	writers  tracker        // subscription event writers
	subs     atomic.Int64   // subscriptions held, at most MaxSubscriptionsPerConn
	// spawned are the goroutines the writers run on (a subscription's
	// drain, the watch pump, a watch alone), started by spawn. run waits
	// for them once every writer has finished, since a writer's last
	// goroutine is still returning when it leaves writers.
	spawned sync.WaitGroup
	// flushing is set once writers must flush and finish (flushWriters):
	// a flag the writers read on every step.
	flushing atomic.Bool
	// parked counts the request streams waiting for the first byte of a
	// frame (see idleReader); once draining is set, each park signals
	// parkC (one slot, never blocking), which the drain waits on.
	parked   atomic.Int64
	unparked atomic.Int64 // how many times a parked stream read a byte
	draining atomic.Bool
	parkC    chan struct{}

	mu          sync.Mutex
	readers     map[readDeadliner]struct{} // request streams, for the drain
	interrupted bool
	// live are the subscription and watch writers to wake when they must
	// flush (one set per connection instead of a registration per
	// subscription). Guarded by mu.
	live map[waker]struct{}
	// streamIDs are the ids in use by the connection's event streams,
	// subscriptions and cache watches alike: a client routes a stream by
	// the id its hello names. Guarded by mu.
	streamIDs map[uint64]struct{}
	// watchPump writes the connection's cache watches.
	watchPump watchPump

	done chan struct{} // closed once everything above has ended
}

// readDeadliner is the receive half of a request stream.
type readDeadliner interface {
	SetReadDeadline(time.Time) error
	CancelRead(transport.StreamErrorCode)
}

func newConnection(s *Server, qc transport.Conn, source string) *connection {
	c := &connection{
		srv:     s,
		qc:      qc,
		source:  source,
		budget:  semaphore.NewWeighted(s.cfg.PublishConnInflightBytes),
		ctx:     qc.Context(),
		readers: map[readDeadliner]struct{}{},
		live:    map[waker]struct{}{},
		parkC:   make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	c.acceptCtx, c.stopAccept = context.WithCancel(c.ctx)
	return c
}

// start runs the connection; the server's connWG owns it.
func (c *connection) start() {
	c.srv.connWG.Add(1)
	c.acceptWG.Add(2)
	go c.acceptBidi()
	go c.acceptUni()
	go c.run()
}

func (c *connection) run() {
	defer c.srv.connWG.Done()
	<-c.ctx.Done()
	c.stopAccept()
	c.flushWriters()
	c.acceptWG.Wait()
	<-c.requests.idleC()
	<-c.writers.idleC()
	c.spawned.Wait()
	c.srv.forget(c)
	close(c.done)
}

// spawn runs f on a goroutine the connection waits for before it is
// done. Only a live writer (one counted in writers) may call it, so every
// spawn happens before run starts waiting.
func (c *connection) spawn(f func()) {
	c.spawned.Add(1)
	go func() {
		defer c.spawned.Done()
		f()
	}()
}

func (c *connection) acceptBidi() {
	defer c.acceptWG.Done()
	for {
		st, err := c.qc.AcceptStream(c.acceptCtx)
		if err != nil {
			return
		}
		c.requests.add(1)
		go c.serveControl(st)
	}
}

func (c *connection) acceptUni() {
	defer c.acceptWG.Done()
	for {
		rs, err := c.qc.AcceptUniStream(c.acceptCtx)
		if err != nil {
			return
		}
		c.requests.add(1)
		go c.serveIngress(rs)
	}
}

// track registers a request stream's receive half so the drain can stop
// its reads; the returned func unregisters it.
func (c *connection) track(r readDeadliner) func() {
	c.mu.Lock()
	c.readers[r] = struct{}{}
	if c.interrupted {
		c.interrupt(r)
	}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.readers, r)
		c.mu.Unlock()
	}
}

// interruptReads makes every request stream stop reading; each then
// answers what it has already read and finishes.
func (c *connection) interruptReads() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.interrupted = true
	for r := range c.readers {
		c.interrupt(r)
	}
}

// interrupt makes r stop reading now. A stream that refuses the deadline
// keeps reading until the drain's budget ends, so that is logged.
func (c *connection) interrupt(r readDeadliner) {
	if err := r.SetReadDeadline(time.Now()); err != nil {
		c.srv.log.Warn("cannot interrupt a request stream's reads; the drain waits for it", "source", c.source, "err", err)
	}
}

// reserveSub takes a place in the subscription limit.
func (c *connection) reserveSub() bool {
	for {
		n := c.subs.Load()
		if n >= int64(c.srv.cfg.MaxSubscriptionsPerConn) {
			return false
		}
		if c.subs.CompareAndSwap(n, n+1) {
			if n == 0 {
				c.srv.metrics.subConnections.Inc()
			}
			return true
		}
	}
}

func (c *connection) releaseSub() {
	if c.subs.Add(-1) == 0 {
		c.srv.metrics.subConnections.Dec()
	}
}

// drain ends the connection gracefully: no new streams; the streams in
// flight get until graceCtx ends to finish by themselves (streams idle
// between frames, such as a subscriber's control stream, are not waited
// for: waitRequests); then they stop
// reading and answer what they read (bounded by ctx, and when ctx ends
// with answers still owed, by late: the broker's work was cancelled, so
// they are errors); then subscriptions write what is queued for them and
// finish (bounded by half of what is left); then the connection is closed
// with wire.CloseShutdown.
func (c *connection) drain(ctx, graceCtx, late context.Context) {
	c.stopAccept()
	c.acceptWG.Wait()
	c.waitRequests(graceCtx)
	c.interruptReads()
	select {
	case <-c.requests.idleC():
	case <-ctx.Done():
		// Past the budget the broker's work is cancelled, so what the
		// streams still owe (a publish waiting on the disk) is being
		// answered with errors: until late, let those answers out.
		ctx = late
		select {
		case <-c.requests.idleC():
		case <-late.Done():
		case <-c.done:
		}
	case <-c.done:
	}
	c.flushSubscriptions(ctx)
	c.linger(ctx)
	c.qc.CloseWithError(transport.ApplicationErrorCode(wire.CloseShutdown), "shutdown")
	<-c.done
}

// Linger bounds: how long the connection must have sent nothing before
// it is closed, and the longest linger.
const (
	lingerQuietMin = 30 * time.Millisecond
	lingerMax      = 2 * time.Second
)

// linger gives the last answers and events time to reach the peer before
// the connection is closed, since closing discards unsent stream data.
// quic-go does not say when sent data has been acknowledged, so linger
// watches the bytes sent: it returns once nothing has been sent for a few
// round trips (everything written went out and was acknowledged, or is
// stuck behind the peer's flow control), when the peer closes, or after at
// most lingerMax or half the budget left. A connection that does not
// count what it sent (no sendStats) lingers lingerQuietMin.
func (c *connection) linger(ctx context.Context) {
	deadline, _ := ctx.Deadline()
	limit := time.Now().Add(min(lingerMax, time.Until(deadline)/2))
	stats, ok := c.qc.(sendStats)
	if !ok {
		stats = quietFor(lingerQuietMin)
	}
	sent, rtt := stats.SendStats()
	quiet := max(4*rtt, lingerQuietMin)
	lastSend := time.Now()
	tick := time.NewTicker(quiet / 3)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if s, _ := stats.SendStats(); s != sent {
				sent, lastSend = s, now
			}
			if now.Sub(lastSend) >= quiet || now.After(limit) {
				return
			}
		}
	}
}

// sendStats is what linger asks of a connection that can tell: the bytes
// it has sent so far and its smoothed round-trip time (quictr's
// connections can).
type sendStats interface {
	SendStats() (bytesSent uint64, smoothedRTT time.Duration)
}

// quietFor is the sendStats of a connection that cannot tell: nothing
// ever sent, so linger waits quiet once.
type quietFor time.Duration

func (quietFor) SendStats() (uint64, time.Duration) { return 0, 0 }

// flushSubscriptions asks every subscription to write what is queued and
// finish its event stream, and waits for them for half the budget left.
func (c *connection) flushSubscriptions(ctx context.Context) {
	c.flushWriters()
	deadline, _ := ctx.Deadline()
	fctx, cancel := context.WithTimeout(ctx, time.Until(deadline)/2)
	defer cancel()
	select {
	case <-c.writers.idleC():
	case <-fctx.Done():
	}
}

// flushWriters sets flushing and wakes every subscription and watch
// writer, which then writes what is queued and finishes.
func (c *connection) flushWriters() {
	c.flushing.Store(true)
	c.mu.Lock()
	ws := make([]waker, 0, len(c.live))
	for w := range c.live {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		w.wake()
	}
}

// waker is a subscription or watch writer: wake makes it look at its
// work (and at whether it must stop) without blocking.
type waker interface{ wake() }

// addWriter registers a writer for flushWriters; the returned func
// removes it.
func (c *connection) addWriter(w waker) func() {
	c.mu.Lock()
	c.live[w] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.live, w)
		c.mu.Unlock()
	}
}

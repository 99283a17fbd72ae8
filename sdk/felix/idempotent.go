package felix

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// Idempotent producers (FEATURE_IDEMPOTENT_PRODUCER).
//
// An IdempotentProducer takes a producer id per stream from the broker
// (producer_init) and numbers its batches per shard from 0. The shard's
// owner remembers each producer's last 64 sequences with where they
// landed, so a batch sent again under the same sequence lands once: the
// re-send is answered with the first copy's offset.
//
// The producer sends from a goroutine of its own, on a control stream of
// its own that offers FEATURE_PUBLISH_PIPELINE, keeping up to
// min(publish_window, 64) batches unanswered (one at a time against a
// broker that grants no window). A call hands its batch over and waits
// for the answer; a call whose context ends returns ctx.Err() but the
// batch still goes out and lands once (do not publish it again). When the
// stream or the connection fails, every unanswered batch is in doubt: the
// producer opens a new stream (dialling a new connection with the
// client's Config when the client's own is gone) and sends them again, in
// order, under the same producer id and sequences, until each is answered.
// A Client's producer talks to that one broker; a ClusterClient's sends
// each shard's batches to the shard's owner, with a stream of its own to
// each owner, and follows not_leader.
//
// A batch the broker refuses (a *PublishRefusedError, or any other fatal
// error) was not written, and neither is any batch behind it on the same
// shard; the producer then takes a fresh producer id for the stream, so
// the batches after it start again at sequence 0 rather than meeting a
// gap. A change of the stream's width follows idempotent_width.go.

// maxIdemInflight caps the unanswered batches: the owner remembers 64
// sequences per producer and shard.
const maxIdemInflight = wire.ProducerWindow

// PublishRefusedError is an idempotent batch the shard's owner would not
// append: Reason is one of wire.ReasonSequenceGap (Expected is the
// sequence the owner expected), wire.ReasonUnknownProducer,
// wire.ReasonSequenceExpired or wire.ReasonSequenceReused. Nothing was
// written. It unwraps to a *BrokerError of code invalid_request (retry
// class fatal) with the reason in its detail.
type PublishRefusedError struct {
	Reason     string
	Expected   uint64 // sequence_gap only
	ProducerID uint64
	Sequence   uint64
	Shard      uint32
}

// Error implements error.
func (e *PublishRefusedError) Error() string {
	if e.Reason == wire.ReasonSequenceGap {
		return fmt.Sprintf("felix: idempotent publish refused (%s): producer %d sent sequence %d on shard %d, the broker expects %d; nothing was written",
			e.Reason, e.ProducerID, e.Sequence, e.Shard, e.Expected)
	}
	return fmt.Sprintf("felix: idempotent publish refused (%s): producer %d, sequence %d on shard %d; nothing was written",
		e.Reason, e.ProducerID, e.Sequence, e.Shard)
}

// Unwrap returns the refusal as a *BrokerError.
func (e *PublishRefusedError) Unwrap() error {
	exp := e.Expected
	return fromWire(wire.ProducerRefusal{Reason: e.Reason, Expected: &exp}.Err())
}

// IdempotentProducer publishes numbered batches that land once when sent
// again. Its methods are safe for concurrent use; batches of concurrent
// calls go out in the order the producer received them.
type IdempotentProducer struct {
	router idemRouter
	cfg    Config
	wrap   func(transport.Stream) transport.Stream // tests only: wraps each lane's stream

	jobs    chan *idemJob
	closing chan struct{} // closed by Close: no batch is taken after it
	closeMu sync.RWMutex  // held for reading while handing a job over
	closed  bool          // guarded by closeMu; jobs is closed once set
	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when the sender has returned
	wg      sync.WaitGroup

	mu          sync.Mutex
	ids         map[string]uint64 // "ns/stream" -> the id its batches go out under
	first       uint64
	failedCalls []*batchesCall // PublishBatches calls that failed, oldest first (idempotent_batches.go)

	// Owned by the sender goroutine.
	lanes   map[*Client]*idemLane  // a stream to each broker batches go to
	owner   map[idemShard]*Client  // where each shard's batches go now
	doubt   []*idemJob             // to send again, in numbering order, before anything new
	redo    []*idemJob             // refused stale_width, never written: sent again or renumbered, in order, before anything new
	ctl     chan idemCtl           // AbandonInDoubt's requests
	streams map[string]*idemStream // by "ns/stream"
	answers chan idemAnswer
	backoff time.Duration
	order   uint64 // numbers jobs as they are numbered
	gen     uint64 // numbers lanes
}

// idemShard names one shard of one stream.
type idemShard struct {
	stream string // "ns/stream"
	shard  uint32
}

// idemLane is the producer's control stream to one broker.
type idemLane struct {
	c        *Client
	st       *ctrlStream
	gen      uint64
	window   int
	inflight []*idemJob // sent, unanswered, in send order
	// out holds the frames of the last buffered batches of inflight, not
	// yet written (idempotent_write.go).
	out      []byte
	buffered int
	// widths is the publish_width declared on the stream, by "ns/stream".
	widths map[string]uint32
}

// idemRouter is where a producer's batches go: one Client, or a
// ClusterClient's shard owners.
type idemRouter interface {
	// entry returns a client for producer_init and stream_shards.
	entry(ctx context.Context) (*Client, error)
	// owner returns the client of the broker serving the shard.
	owner(ctx context.Context, ns, stream string, shard uint32) (*Client, error)
	// redirected returns the client at addr, which a not_leader named, or
	// nil when the producer does not follow redirects.
	redirected(ctx context.Context, addr string) *Client
	// failed reports that c did not serve the shard (its connection
	// failed, or it is not the owner).
	failed(c *Client, ns, stream string, shard uint32)
	// close closes what the router dialled itself.
	close()
}

// idemStream is what the producer holds of one stream.
type idemStream struct {
	id    uint64
	width uint32            // the stream's width as last asked (0: ask again)
	seqs  map[uint32]uint64 // next sequence per shard
	// widthOf is the width id's keyed batches are numbered by (0 before
	// the first): under another, the stream takes a fresh id.
	widthOf uint32
	// held are batches in doubt whose re-send under the width that
	// numbered them was refused stale_width (idempotent_width.go).
	held []*idemJob
}

// clientRouter sends everything to one Client, dialling a replacement
// with its Config when its connection is gone.
type clientRouter struct {
	base  *Client
	cur   *Client
	owned *Client // dialled by the router; closed with it
}

func (r *clientRouter) entry(ctx context.Context) (*Client, error) {
	if !r.cur.dead() {
		return r.cur, nil
	}
	c, err := Connect(ctx, r.base.cfg)
	if err != nil {
		return nil, err
	}
	if r.owned != nil {
		_ = r.owned.Close()
	}
	r.cur, r.owned = c, c
	return c, nil
}

func (r *clientRouter) owner(ctx context.Context, _, _ string, _ uint32) (*Client, error) {
	return r.entry(ctx)
}

func (r *clientRouter) redirected(context.Context, string) *Client { return nil }

func (r *clientRouter) failed(*Client, string, string, uint32) {}

func (r *clientRouter) close() {
	if r.owned != nil {
		_ = r.owned.Close()
	}
}

// clusterRouter sends each shard's batches to its owner as the
// ClusterClient knows it, and forgets the owner when it fails.
type clusterRouter struct{ cc *ClusterClient }

func (r clusterRouter) entry(ctx context.Context) (*Client, error) { return r.cc.client(ctx) }

func (r clusterRouter) owner(ctx context.Context, ns, stream string, shard uint32) (*Client, error) {
	c, _, _, err := r.cc.routedClient(ctx, streamRoute(ns, stream, nil, shard), false)
	return c, err
}

func (r clusterRouter) redirected(ctx context.Context, addr string) *Client {
	c, err := r.cc.clientAt(ctx, addr)
	if err != nil {
		return nil
	}
	return c
}

func (r clusterRouter) failed(c *Client, ns, stream string, shard uint32) {
	if c.dead() {
		r.cc.invalidate(c)
	}
	if r.cc.owners != nil {
		r.cc.owners.drop(ownerKey{kind: KindStream, namespace: ns, name: stream}, shard)
	}
}

func (clusterRouter) close() {}

type idemJob struct {
	ns, stream string
	name       string // "ns/stream", the key of the producer's maps
	key        []byte
	payloads   [][]byte
	// Set when the batch is numbered, kept for every re-send.
	numbered bool
	id, seq  uint64
	shard    uint32
	order    uint64 // when it was numbered, among all the producer's batches
	reqID    uint64 // of the latest send
	res      chan idemResult
	// notFound is when the broker first answered not_found to it.
	notFound time.Time
	// attempts counts the failures to number it.
	attempts int
	// width is the stream width that numbered a keyed batch (0 for an
	// unkeyed one): it is declared with every send (publish_width), so
	// the broker refuses it, stale_width, once the stream has another.
	width uint32
	// maybeLanded is set once a send went unanswered (its lane failed, or
	// it was answered outcome_unknown): the batch may be in the log, so
	// only a re-send under its own numbering may settle it.
	maybeLanded bool
	// answered is set once res was written (a held batch's call has its
	// error while the batch waits to settle).
	answered bool
	// abandoned is set by AbandonInDoubt: its answer is not waited for.
	abandoned bool
	// retriedHeld is set once this new batch sent the stream's held
	// batches again before it (idempotent_width.go).
	retriedHeld bool
}

// answer writes j's result, once.
func (j *idemJob) answer(r idemResult) {
	if j.answered {
		return
	}
	j.answered = true
	j.res <- r
}

// idemNumberAttempts bounds the tries to number a batch (take the
// stream's producer id, learn its width) before the batch fails.
const idemNumberAttempts = 30

// idemNotFoundPatience is how long a batch refused not_found is sent
// again before the refusal stands: long enough for a restarted or newly
// promoted broker to learn the stream from its control plane.
const idemNotFoundPatience = 5 * time.Second

type idemResult struct {
	offset uint64
	err    error
}

type idemAnswer struct {
	lane *idemLane
	gen  uint64
	msg  wire.Message
	err  error
}

// IdempotentProducer returns a producer publishing through c. It needs a
// broker that advertised FEATURE_IDEMPOTENT_PRODUCER. The producer uses
// c's connection while it lives, and a connection of its own (dialled with
// c's Config) after it fails; Close the producer before c.
func (c *Client) IdempotentProducer(ctx context.Context) (*IdempotentProducer, error) {
	if err := ctx.Err(); err != nil {
		return nil, notSent(err)
	}
	if err := c.needFeature(wire.FeatureIdempotentProducer, "idempotent producers (FEATURE_IDEMPOTENT_PRODUCER)"); err != nil {
		return nil, err
	}
	if err := c.checkUsable(); err != nil {
		return nil, err
	}
	return newIdempotentProducer(&clientRouter{base: c, cur: c}, c.cfg, nil), nil
}

// IdempotentProducer returns a producer publishing through cc: each
// shard's batches go to the shard's owner (on a stream of the producer's
// own to each owner) and follow not_leader, and a batch in doubt when its
// owner's connection fails is sent again to the owner found next. It
// needs the brokers to advertise FEATURE_IDEMPOTENT_PRODUCER. Close the
// producer before cc.
func (cc *ClusterClient) IdempotentProducer(ctx context.Context) (*IdempotentProducer, error) {
	if err := ctx.Err(); err != nil {
		return nil, notSent(err)
	}
	c, err := cc.client(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.needFeature(wire.FeatureIdempotentProducer, "idempotent producers (FEATURE_IDEMPOTENT_PRODUCER)"); err != nil {
		return nil, err
	}
	return newIdempotentProducer(clusterRouter{cc: cc}, c.cfg, nil), nil
}

// newIdempotentProducer starts a producer; wrap, when set (tests only),
// wraps the stream of each lane the producer opens.
func newIdempotentProducer(r idemRouter, cfg Config, wrap func(transport.Stream) transport.Stream) *IdempotentProducer {
	pctx, cancel := context.WithCancel(context.Background())
	p := &IdempotentProducer{router: r, cfg: cfg, wrap: wrap, jobs: make(chan *idemJob, maxIdemInflight), closing: make(chan struct{}),
		ctx: pctx, cancel: cancel, done: make(chan struct{}), ids: map[string]uint64{},
		lanes: map[*Client]*idemLane{}, owner: map[idemShard]*Client{}, streams: map[string]*idemStream{},
		answers: make(chan idemAnswer, 16), ctl: make(chan idemCtl)}
	go p.run()
	return p
}

// ProducerID returns the first producer id the producer took (0 before
// its first batch).
func (p *IdempotentProducer) ProducerID() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// ProducerIDFor returns the producer id namespace/stream's batches go out
// under now: after a width change or a refusal, a fresh one (0 when none
// was taken yet, and after AbandonInDoubt until the next batch takes one).
func (p *IdempotentProducer) ProducerIDFor(namespace, stream string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ids[namespace+"/"+stream]
}

// Publish publishes payload as a one-record batch on shard 0 and returns
// its offset (the first copy's, when the batch had landed before).
func (p *IdempotentProducer) Publish(ctx context.Context, namespace, stream string, payload []byte) (uint64, error) {
	return p.PublishBatch(ctx, namespace, stream, nil, [][]byte{payload})
}

// PublishKeyed publishes payload on the shard key picks (the stream's
// width is asked once, with stream_shards).
func (p *IdempotentProducer) PublishKeyed(ctx context.Context, namespace, stream string, key, payload []byte) (uint64, error) {
	return p.PublishBatch(ctx, namespace, stream, key, [][]byte{payload})
}

// PublishBatch publishes payloads as one batch on the shard key picks
// (shard 0 for a nil key) and returns the offset of its first record.
func (p *IdempotentProducer) PublishBatch(ctx context.Context, namespace, stream string, key []byte, payloads [][]byte) (uint64, error) {
	j, err := p.submit(ctx, namespace, stream, key, payloads)
	if err != nil {
		return 0, err
	}
	return p.wait(ctx, j)
}

// PublishBatches publishes each of batches as one batch on shard 0, in
// order, keeping up to the window of them unanswered at once, and returns
// their offsets. On an error the offsets of the batches answered before
// it are returned with it; the batches handed over still go out, each
// landing once. Making the same call again (the same namespace, stream
// and batches) after it failed does not send them again: the batches
// that landed are answered with their offsets, those still going out are
// waited for, and only those never handed over or refused (so never
// written) are sent (see batchesCall).
func (p *IdempotentProducer) PublishBatches(ctx context.Context, namespace, stream string, batches [][][]byte) ([]uint64, error) {
	for i, b := range batches {
		if err := p.check(namespace, stream, b); err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
	}
	call := p.takeFailedCall(namespace+"/"+stream, batches)
	if call == nil {
		call = newBatchesCall(namespace+"/"+stream, len(batches))
	}
	// Hand over every batch that needs sending, in order, so that they
	// are in flight together; then take the answers in order.
	var serr error
	for i, b := range batches {
		sl := &call.slots[i]
		if sl.state != slotUnsent && sl.state != slotRefused {
			continue
		}
		if serr != nil {
			sl.state, sl.job, sl.payloads = slotUnsent, nil, ownPayloads(b)
			continue
		}
		j, err := p.submit(ctx, namespace, stream, nil, b)
		if err != nil {
			serr = err
			sl.state, sl.job, sl.payloads = slotUnsent, nil, ownPayloads(b)
			continue
		}
		sl.state, sl.job, sl.payloads, sl.err = slotPending, j, j.payloads, nil
	}
	offs := make([]uint64, 0, len(batches))
	for i := range call.slots {
		sl := &call.slots[i]
		switch sl.state {
		case slotLanded:
			offs = append(offs, sl.off)
			continue
		case slotFailed:
			p.keepFailedCall(call)
			return offs, sl.err
		case slotUnsent:
			p.keepFailedCall(call)
			return offs, serr
		}
		select {
		case r := <-sl.job.res:
			var refused *PublishRefusedError
			switch {
			case r.err == nil:
				sl.state, sl.off = slotLanded, r.offset
				offs = append(offs, r.offset)
				continue
			case errors.As(r.err, &refused):
				sl.state, sl.err = slotRefused, r.err
			default:
				sl.state, sl.err = slotFailed, r.err
			}
			p.keepFailedCall(call)
			return offs, r.err
		case <-ctx.Done():
			p.keepFailedCall(call)
			return offs, ctx.Err()
		}
	}
	return offs, nil
}

// check validates a batch before it is handed over.
func (p *IdempotentProducer) check(namespace, stream string, payloads [][]byte) error {
	if namespace == "" || stream == "" {
		return invalidArg("an idempotent publish needs a namespace and a stream")
	}
	if len(payloads) == 0 {
		return invalidArg("an idempotent batch holds at least one record")
	}
	size := 256 + len(namespace) + len(stream) + len(p.cfg.Tenant)
	for _, pl := range payloads {
		size += (len(pl)+2)/3*4 + 3
	}
	if uint64(size) > uint64(p.cfg.MaxFrameBytes) {
		return invalidArg("an idempotent batch of about %d encoded bytes is larger than MaxFrameBytes %d", size, p.cfg.MaxFrameBytes)
	}
	return nil
}

// submit hands a batch to the sender. It fails, with nothing sent, only
// when the producer is closed, the batch is invalid or ctx ends first.
func (p *IdempotentProducer) submit(ctx context.Context, namespace, stream string, key []byte, payloads [][]byte) (*idemJob, error) {
	if err := p.check(namespace, stream, payloads); err != nil {
		return nil, err
	}
	own := make([][]byte, len(payloads))
	for i, pl := range payloads {
		own[i] = append([]byte{}, pl...)
	}
	j := &idemJob{ns: namespace, stream: stream, name: namespace + "/" + stream, key: append([]byte(nil), key...), payloads: own, res: make(chan idemResult, 1)}
	if len(key) == 0 {
		j.key = nil
	}
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		return nil, notSent(ErrClosed)
	}
	select {
	case p.jobs <- j:
		return j, nil
	case <-ctx.Done():
		return nil, notSent(ctx.Err())
	case <-p.closing:
		return nil, notSent(ErrClosed)
	}
}

// wait returns the batch's answer, or ctx.Err() when ctx ends first (the
// batch still goes out).
func (p *IdempotentProducer) wait(ctx context.Context, j *idemJob) (uint64, error) {
	select {
	case r := <-j.res:
		return r.offset, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Close stops taking batches and waits until every batch handed over has
// been answered, or ctx ends; then it stops the producer (batches still
// unanswered fail with ErrClosed and may have landed) and closes the
// connections the producer dialled. It does not close the client.
func (p *IdempotentProducer) Close(ctx context.Context) error {
	p.once.Do(func() {
		close(p.closing) // releases callers waiting to hand a batch over
		p.closeMu.Lock()
		p.closed = true
		close(p.jobs)
		p.closeMu.Unlock()
	})
	var err error
	select {
	case <-p.done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.cancel()
	<-p.done
	p.wg.Wait()
	return err
}

// run is the sender.
func (p *IdempotentProducer) run() {
	defer close(p.done)
	defer p.stop()
	jobs := p.jobs
	var next *idemJob
	for p.ctx.Err() == nil {
		if next == nil && jobs == nil && len(p.doubt) == 0 && len(p.redo) == 0 && p.unanswered() == 0 {
			return // closed and drained
		}
		if p.sendDoubt() {
			continue
		}
		// Batches refused stale_width go before the next new one.
		cur, redo := next, len(p.redo) > 0
		if redo {
			cur = p.redo[0]
		}
		if cur != nil && len(p.doubt) == 0 {
			if sent, progressed := p.sendNew(cur); sent {
				if redo {
					p.redo = p.redo[1:]
				} else {
					next = nil
				}
				continue
			} else if progressed {
				continue
			}
		}
		// Write what the lanes buffered before waiting, unless a batch
		// or an answer is ready at once: batches ready together leave in
		// one write (idempotent_write.go).
		takeMore := next == nil && len(p.doubt) == 0 && len(jobs) > 0
		if !takeMore && len(p.answers) == 0 && p.flushAll() {
			continue // a lane failed: its batches are in doubt
		}
		var in chan *idemJob
		if next == nil && len(p.doubt) == 0 {
			in = jobs
		}
		var retry <-chan time.Time
		var timer *time.Timer
		if next != nil || len(p.doubt) > 0 || len(p.redo) > 0 {
			// Waiting for room in a lane (an answer wakes the loop) or for
			// a lane to be had: look again after a while either way.
			timer = time.NewTimer(max(p.backoff, 10*time.Millisecond))
			retry = timer.C
		}
		select {
		case j, ok := <-in:
			if !ok {
				jobs = nil
				continue
			}
			next = j
		case a := <-p.answers:
			if l := p.lanes[a.lane.c]; l == a.lane && l.gen == a.gen {
				p.handle(l, a)
			}
		case c := <-p.ctl:
			c.res <- p.abandon(c.ns, c.stream)
		case <-retry:
		case <-p.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
	}
	if next != nil {
		next.answer(idemResult{err: ErrClosed})
	}
}

// unanswered counts the batches sent and not answered.
func (p *IdempotentProducer) unanswered() int {
	n := 0
	for _, l := range p.lanes {
		n += len(l.inflight)
	}
	return n
}

// stop fails what is left, ends the streams and closes dialled clients.
func (p *IdempotentProducer) stop() {
	for _, l := range p.lanes {
		for _, j := range l.inflight {
			j.answer(idemResult{err: fmt.Errorf("felix: idempotent producer closed with the batch unanswered; it may have landed: %w", ErrClosed)})
		}
		l.inflight = nil
		l.st.abort()
	}
	for _, j := range p.doubt {
		j.answer(idemResult{err: fmt.Errorf("felix: idempotent producer closed with the batch unanswered; it may have landed: %w", ErrClosed)})
	}
	p.doubt = nil
	for _, j := range p.redo {
		j.answer(idemResult{err: ErrClosed})
	}
	p.redo = nil
	p.lanes = map[*Client]*idemLane{}
	for {
		select {
		case j, ok := <-p.jobs:
			if !ok {
				p.router.close()
				return
			}
			j.answer(idemResult{err: ErrClosed})
		default:
			p.router.close()
			return
		}
	}
}

// pause waits out the backoff failures left; false when the producer is
// stopping.
func (p *IdempotentProducer) pause() bool {
	if p.backoff > 0 {
		p.flushAll()
		t := time.NewTimer(p.backoff)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return false
		}
	}
	return p.ctx.Err() == nil
}

// grow lengthens the backoff after a failure: 50 ms, doubling, at most
// 1 s; an answered batch resets it.
func (p *IdempotentProducer) grow() {
	p.backoff = min(max(2*p.backoff, 50*time.Millisecond), time.Second)
}

// lane returns the open lane j's batches go to, opening a stream (after
// the backoff) when there is none; nil when none could be had now.
func (p *IdempotentProducer) lane(j *idemJob) *idemLane {
	k := idemShard{j.name, j.shard}
	c := p.owner[k]
	if c != nil && c.dead() {
		// Its batches in flight go in doubt before anything is sent
		// elsewhere, so a shard's batches never travel two lanes at once.
		if l := p.lanes[c]; l != nil {
			p.laneFailed(l)
		}
		p.router.failed(c, j.ns, j.stream, j.shard)
		delete(p.owner, k)
		c = nil
	}
	if c == nil || p.lanes[c] == nil {
		p.flushAll() // what follows may wait on the network
	}
	if c == nil {
		if !p.pause() {
			return nil
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
		oc, err := p.router.owner(ctx, j.ns, j.stream, j.shard)
		cancel()
		if err != nil {
			p.grow()
			return nil
		}
		c = oc
		p.owner[k] = c
	}
	if l := p.lanes[c]; l != nil {
		return l
	}
	if !p.pause() {
		return nil
	}
	st, err := c.openStreamOffering(p.ctx, wire.FeaturePublishPipeline)
	if err != nil {
		p.grow()
		p.router.failed(c, j.ns, j.stream, j.shard)
		delete(p.owner, k)
		return nil
	}
	if p.wrap != nil {
		st.s = p.wrap(st.s)
	}
	p.gen++
	l := &idemLane{c: c, st: st, gen: p.gen, window: 1}
	if w := st.ok.PublishWindow; w != nil && *w > 0 && st.ok.ServerFeatures&wire.FeaturePublishPipeline != 0 {
		l.window = int(min(*w, maxIdemInflight))
	}
	p.lanes[c] = l
	p.wg.Add(1)
	go p.read(l)
	return l
}

// read hands the lane's answers to the sender until its stream fails.
func (p *IdempotentProducer) read(l *idemLane) {
	defer p.wg.Done()
	for {
		msg, err := readMessage(l.st.fr)
		select {
		case p.answers <- idemAnswer{lane: l, gen: l.gen, msg: msg, err: err}:
		case <-p.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// laneFailed ends l: its unanswered batches go in doubt, in numbering
// order with those already there, and the shards it served are routed
// afresh.
func (p *IdempotentProducer) laneFailed(l *idemLane) {
	if p.lanes[l.c] != l {
		return // failed already
	}
	p.grow()
	l.st.abort()
	delete(p.lanes, l.c)
	// Batches still buffered were never written by this lane.
	for _, j := range l.inflight[:max(0, len(l.inflight)-l.buffered)] {
		j.maybeLanded = true
	}
	l.out, l.buffered = nil, 0
	p.doubt = append(p.doubt, l.inflight...)
	slices.SortFunc(p.doubt, func(a, b *idemJob) int { return cmp.Compare(a.order, b.order) })
	for _, j := range l.inflight {
		p.router.failed(l.c, j.ns, j.stream, j.shard)
	}
	l.inflight = nil
	for k, c := range p.owner {
		if c == l.c {
			delete(p.owner, k)
		}
	}
}

// sendDoubt sends batches in doubt again, in order, while their lanes
// have room; it reports whether it sent any.
func (p *IdempotentProducer) sendDoubt() bool {
	sent := false
	for len(p.doubt) > 0 && p.ctx.Err() == nil {
		j := p.doubt[0]
		l := p.lane(j)
		if len(p.doubt) == 0 || p.doubt[0] != j {
			continue // a failed lane put older batches first
		}
		if l == nil || len(l.inflight) >= l.window {
			return sent
		}
		p.doubt = p.doubt[1:]
		p.write(l, j)
		sent = true
	}
	return sent
}

// sendNew numbers j and sends it. sent: j is now unanswered, in doubt or
// answered (with a failure it cannot be sent past); progressed: not sent,
// but something changed (a lane was opened or lost) worth another turn.
func (p *IdempotentProducer) sendNew(j *idemJob) (sent, progressed bool) {
	if hold, sent, progressed := p.widthRules(j); hold {
		return sent, progressed
	}
	if !j.numbered {
		if err := p.number(j); err != nil {
			// A broker's fatal refusal, or failures past a bound, fail the
			// batch; anything else (no connection, a timeout, a refusal
			// that says try again) is tried again after the backoff.
			j.attempts++
			var ide *InDoubtError
			if p.ctx.Err() == nil && !isFatal(err) && !errors.As(err, &ide) && j.attempts < idemNumberAttempts {
				p.grow()
				return false, p.pause()
			}
			j.answer(idemResult{err: err})
			return true, true
		}
	}
	lanes := len(p.lanes)
	l := p.lane(j)
	if len(p.doubt) > 0 {
		return false, true // a failed lane put batches in doubt: they go first
	}
	if l == nil || len(l.inflight) >= l.window {
		return false, len(p.lanes) != lanes
	}
	p.write(l, j)
	return true, true
}

// isFatal reports a broker refusal that sending again will not change.
func isFatal(err error) bool {
	var be *BrokerError
	return errors.As(err, &be) && be.Retry == wire.RetryFatal
}

// number gives j its producer id, shard and sequence, taking an id for
// the stream and learning its width first when needed.
func (p *IdempotentProducer) number(j *idemJob) error {
	key := j.name
	s := p.streams[key]
	if s == nil {
		s = &idemStream{seqs: map[uint32]uint64{}}
		p.streams[key] = s
	}
	// The calls below wait on the network only when the stream needs an
	// id or a width: their context (a timer) is made then, not per batch.
	lc := lazyCtx{parent: p.ctx, timeout: p.cfg.DialTimeout}
	defer lc.stop()
	var c *Client
	entry := func() (*Client, error) {
		if c != nil {
			return c, nil
		}
		p.flushAll() // the calls that follow wait on the network
		var err error
		c, err = p.router.entry(lc.get())
		return c, err
	}
	if j.key != nil {
		if s.width == 0 {
			if err := p.learnWidth(lc.get(), entry, j, s); err != nil {
				return err
			}
		}
		if s.id != 0 && s.widthOf != 0 && s.width != s.widthOf {
			// A new width: the stream's sequences start again under a
			// fresh id, unless a batch numbered by the old one is in doubt.
			if n := p.unsure(key); n > 0 {
				return p.inDoubt(j, s, n)
			}
			s.id = 0
		}
	}
	if s.id == 0 {
		c, err := entry()
		if err != nil {
			return err
		}
		id, err := p.takeID(lc.get(), c, j.ns, j.stream)
		if err != nil {
			return err
		}
		s.id, s.seqs, s.widthOf = id, map[uint32]uint64{}, 0
	}
	var shard uint32
	j.width = 0
	if j.key != nil {
		if s.widthOf == 0 {
			s.widthOf = s.width
		}
		shard, j.width = wire.ShardForKey(j.key, s.width), s.width
	}
	p.order++
	j.numbered, j.id, j.shard, j.seq, j.order = true, s.id, shard, s.seqs[shard], p.order
	s.seqs[shard]++
	return nil
}

// lazyCtx makes a context with a timeout when first asked for it.
type lazyCtx struct {
	parent  context.Context
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
}

func (l *lazyCtx) get() context.Context {
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithTimeout(l.parent, l.timeout)
	}
	return l.ctx
}

// stop releases the context, if one was made.
func (l *lazyCtx) stop() {
	if l.cancel != nil {
		l.cancel()
	}
}

// learnWidth asks the stream's width when it is not known (first use,
// or dropped by a stale_width or not_found refusal).
func (p *IdempotentProducer) learnWidth(ctx context.Context, entry func() (*Client, error), j *idemJob, s *idemStream) error {
	if s.width != 0 {
		return nil
	}
	c, err := entry()
	if err != nil {
		return err
	}
	w, err := c.StreamShards(ctx, j.ns, j.stream)
	if err != nil {
		return fmt.Errorf("felix: an idempotent keyed publish needs the stream's width: %w", err)
	}
	if w == 0 {
		return fmt.Errorf("felix: the broker knows no stream %s/%s", j.ns, j.stream)
	}
	s.width = w
	return nil
}

// takeID takes a producer id for namespace/stream with producer_init
// and makes it the stream's current one.
func (p *IdempotentProducer) takeID(ctx context.Context, c *Client, namespace, stream string) (uint64, error) {
	m := &wire.ProducerInit{TenantID: p.cfg.Tenant, Namespace: namespace, Stream: stream}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return 0, err
	}
	ok, isOK := res.msg.(*wire.ProducerInitOK)
	if !isOK || ok.ProducerID == 0 {
		return 0, fmt.Errorf("felix: producer_init answered with %s", typeOf(res.msg))
	}
	p.mu.Lock()
	p.ids[namespace+"/"+stream] = ok.ProducerID
	if p.first == 0 {
		p.first = ok.ProducerID
	}
	p.mu.Unlock()
	return ok.ProducerID, nil
}

// take removes and returns l's unanswered batch of request id.
func (l *idemLane) take(id uint64) *idemJob {
	for i, j := range l.inflight {
		if j.reqID == id {
			l.inflight = append(l.inflight[:i], l.inflight[i+1:]...)
			return j
		}
	}
	return nil
}

// find returns l's unanswered batch of request id, leaving it there.
func (l *idemLane) find(id uint64) *idemJob {
	for _, j := range l.inflight {
		if j.reqID == id {
			return j
		}
	}
	return nil
}

// handle acts on one answer from l.
func (p *IdempotentProducer) handle(l *idemLane, a idemAnswer) {
	if a.err != nil {
		p.laneFailed(l)
		return
	}
	switch m := a.msg.(type) {
	case *wire.PublishOK:
		if j := l.take(m.RequestID); j != nil {
			p.backoff = 0
			if m.Offset == nil {
				j.answer(idemResult{err: fmt.Errorf("felix: the broker acknowledged an idempotent batch without its offset")})
				return
			}
			j.answer(idemResult{offset: *m.Offset})
		}
	case *wire.PublishRefused:
		if j := l.take(m.RequestID); j != nil {
			var err error = fromWire(m.Err())
			if r := m.Producer; r != nil {
				pe := &PublishRefusedError{Reason: r.Reason, ProducerID: j.id, Sequence: j.seq, Shard: j.shard}
				if r.Expected != nil {
					pe.Expected = *r.Expected
				}
				err = pe
			}
			p.failed(j, err)
		}
	case *wire.PublishError:
		p.refused(l, &m.RequestID, m.Err(), "")
	case *wire.ErrorMsg:
		p.refused(l, m.RequestID, m.Err(), "")
	case *wire.NotLeader:
		if m.RequestID != nil {
			p.refused(l, m.RequestID, wire.NewError(wire.CodeNotLeader, "not the shard's leader"), m.Addr)
		}
	case *wire.Unsupported:
		if m.RequestID != nil {
			if j := l.take(*m.RequestID); j != nil {
				p.failed(j, unsupported(m.RequestType))
			}
		}
	}
}

// refused acts on an error answer on l. A class that says the batch may
// be sent again (retry, retry_after, outcome_unknown), not_found for up
// to idemNotFoundPatience, and not_leader on a producer that follows
// the owner (redirect names it when known) put everything unanswered on
// l in doubt, to be sent again after a backoff. Any other fails the batch
// it names, or every batch unanswered on l for an error naming none.
func (p *IdempotentProducer) refused(l *idemLane, id *uint64, e *wire.Error, redirect string) {
	var j *idemJob
	if id != nil {
		j = l.find(*id)
	}
	if e.Code == wire.CodeStaleWidth && j != nil {
		p.staleWidth(l, j, e)
		return
	}
	if e.Code == wire.CodeNotFound && j != nil {
		p.dropWidth(j)
	}
	transient := false
	switch e.Retry {
	case wire.RetryRetry, wire.RetryRetryAfter, wire.RetryOutcomeUnknown:
		transient = e.Code != wire.CodeNotLeader
	}
	if e.Code == wire.CodeNotFound && j != nil {
		if j.notFound.IsZero() {
			j.notFound = time.Now()
		}
		transient = time.Since(j.notFound) < idemNotFoundPatience
	}
	if e.Code == wire.CodeNotLeader && j != nil {
		if nl, ok := wire.NotLeaderFromError(e); ok && redirect == "" {
			redirect = nl.Addr
		}
		if _, follows := p.router.(clusterRouter); follows {
			transient = true
			if redirect != "" {
				p.flushAll() // the redirect may be dialled
				ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
				if c := p.router.redirected(ctx, redirect); c != nil {
					defer func() { p.owner[idemShard{j.name, j.shard}] = c }()
				}
				cancel()
			}
		}
	}
	if transient {
		// A refusal that says nothing was applied leaves a batch that
		// never went unanswered sure not to have landed.
		sure := j != nil && !j.maybeLanded && e.Retry != wire.RetryOutcomeUnknown
		p.laneFailed(l)
		if sure {
			j.maybeLanded = false
		}
		return
	}
	if id == nil {
		for _, j := range l.inflight {
			p.failed(j, brokerErrorFromWire(e))
		}
		l.inflight = nil
		p.laneFailed(l)
		return
	}
	if j := l.take(*id); j != nil {
		if e.Code == wire.CodeNotLeader {
			nl := &wire.NotLeader{Addr: redirect}
			p.failed(j, notLeaderError(nl))
			return
		}
		p.failed(j, brokerErrorFromWire(e))
	}
}

// failed answers j with err. j was not written, so the batches behind it
// on its shard will not be either (they meet a gap): the stream takes a
// fresh producer id for what comes next.
func (p *IdempotentProducer) failed(j *idemJob, err error) {
	j.answer(idemResult{err: err})
	if s := p.streams[j.name]; s != nil && s.id == j.id {
		s.id = 0
	}
}

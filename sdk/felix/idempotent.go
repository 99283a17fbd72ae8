package felix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
// A plain Client's producer talks to that one broker; ClusterClient does
// not offer a producer yet.
//
// A batch the broker refuses (a *PublishRefusedError, or any other fatal
// error) was not written, and neither is any batch behind it on the same
// shard; the producer then takes a fresh producer id for the stream, so
// the batches after it start again at sequence 0 rather than meeting a
// gap.

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
	base *Client
	cfg  Config

	jobs    chan *idemJob
	closing chan struct{} // closed by Close: no batch is taken after it
	closeMu sync.RWMutex  // held for reading while handing a job over
	closed  bool          // guarded by closeMu; jobs is closed once set
	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when the sender has returned
	wg      sync.WaitGroup

	mu    sync.Mutex
	ids   map[string]uint64 // "ns/stream" -> the id its batches go out under
	first uint64

	// Owned by the sender goroutine.
	cur      *Client   // the client the stream is on: base, or one dialled
	owned    []*Client // clients the producer dialled (closed by it)
	st       *ctrlStream
	gen      uint64 // counts streams, to drop a dead stream's answers
	window   int
	inflight []*idemJob // sent, unanswered, in send order
	doubt    []*idemJob // to send again, in order, before anything new
	streams  map[string]*idemStream
	answers  chan idemAnswer
	backoff  time.Duration
}

// idemStream is what the producer holds of one stream.
type idemStream struct {
	id    uint64
	width uint32
	seqs  map[uint32]uint64 // next sequence per shard
}

type idemJob struct {
	ns, stream string
	key        []byte
	payloads   [][]byte
	// Set when the batch is numbered, kept for every re-send.
	numbered bool
	id, seq  uint64
	shard    uint32
	reqID    uint64 // of the latest send
	res      chan idemResult
	// notFound is when the broker first answered not_found to it.
	notFound time.Time
}

// idemNotFoundPatience is how long a batch refused not_found is sent
// again before the refusal stands: long enough for a restarted or newly
// promoted broker to learn the stream from its control plane.
const idemNotFoundPatience = 5 * time.Second

type idemResult struct {
	offset uint64
	err    error
}

type idemAnswer struct {
	gen uint64
	msg wire.Message
	err error
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
	pctx, cancel := context.WithCancel(context.Background())
	p := &IdempotentProducer{base: c, cfg: c.cfg, jobs: make(chan *idemJob, maxIdemInflight), closing: make(chan struct{}), ctx: pctx, cancel: cancel,
		done: make(chan struct{}), ids: map[string]uint64{}, cur: c, streams: map[string]*idemStream{},
		answers: make(chan idemAnswer, 16)}
	go p.run()
	return p, nil
}

// ProducerID returns the first producer id the producer took (0 before
// its first batch).
func (p *IdempotentProducer) ProducerID() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// ProducerIDFor returns the producer id namespace/stream's batches go out
// under now (0 when none was taken yet).
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
// landing once.
func (p *IdempotentProducer) PublishBatches(ctx context.Context, namespace, stream string, batches [][][]byte) ([]uint64, error) {
	for i, b := range batches {
		if err := p.check(namespace, stream, b); err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
	}
	jobs := make([]*idemJob, 0, len(batches))
	var serr error
	for _, b := range batches {
		j, err := p.submit(ctx, namespace, stream, nil, b)
		if err != nil {
			serr = err
			break
		}
		jobs = append(jobs, j)
	}
	offs := make([]uint64, 0, len(jobs))
	for _, j := range jobs {
		off, err := p.wait(ctx, j)
		if err != nil {
			return offs, err
		}
		offs = append(offs, off)
	}
	return offs, serr
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
	j := &idemJob{ns: namespace, stream: stream, key: append([]byte(nil), key...), payloads: own, res: make(chan idemResult, 1)}
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
	for {
		if next == nil && jobs == nil && len(p.inflight) == 0 && len(p.doubt) == 0 {
			return // closed and drained
		}
		if p.st == nil && (next != nil || len(p.doubt) > 0) {
			if !p.connect() {
				return
			}
			continue
		}
		if p.st != nil && !p.sendDoubt() {
			continue
		}
		if p.st != nil && next != nil && len(p.doubt) == 0 && len(p.inflight) < p.window {
			// Unless it could not be numbered for want of a connection
			// (then it is kept), next is now answered, unanswered or in
			// doubt.
			if sent, _ := p.sendNew(next); sent {
				next = nil
			}
			continue
		}
		var in chan *idemJob
		if next == nil && len(p.doubt) == 0 {
			in = jobs
		}
		select {
		case j, ok := <-in:
			if !ok {
				jobs = nil
				continue
			}
			next = j
		case a := <-p.answers:
			if a.gen == p.gen && p.st != nil {
				p.handle(a)
			}
		case <-p.ctx.Done():
			if next != nil {
				next.res <- idemResult{err: ErrClosed}
			}
			return
		}
	}
}

// stop fails what is left, ends the stream and closes dialled clients.
func (p *IdempotentProducer) stop() {
	for _, j := range append(p.inflight, p.doubt...) {
		j.res <- idemResult{err: fmt.Errorf("felix: idempotent producer closed with the batch unanswered; it may have landed: %w", ErrClosed)}
	}
	p.inflight, p.doubt = nil, nil
	p.dropStream()
	for {
		select {
		case j, ok := <-p.jobs:
			if !ok {
				goto closed
			}
			j.res <- idemResult{err: ErrClosed}
		default:
			goto closed
		}
	}
closed:
	for _, c := range p.owned {
		_ = c.Close()
	}
	p.owned = nil
}

// connect opens a stream, after the backoff a failure left, dialling a
// new client when the current one's connection is gone. False: the
// producer was stopped meanwhile.
func (p *IdempotentProducer) connect() bool {
	if p.backoff > 0 {
		t := time.NewTimer(p.backoff)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return false
		}
	}
	p.backoff = min(max(2*p.backoff, 50*time.Millisecond), time.Second)
	if p.cur.dead() {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
		c, err := Connect(ctx, p.cfg)
		cancel()
		if err != nil {
			return p.ctx.Err() == nil
		}
		if p.cur != p.base {
			_ = p.cur.Close()
			p.owned = p.owned[:0]
		}
		p.cur = c
		p.owned = append(p.owned, c)
	}
	st, err := p.cur.openStreamOffering(p.ctx, wire.FeaturePublishPipeline)
	if err != nil {
		return p.ctx.Err() == nil
	}
	p.st = st
	p.gen++
	p.window = 1
	if w := st.ok.PublishWindow; w != nil && *w > 0 && st.ok.ServerFeatures&wire.FeaturePublishPipeline != 0 {
		p.window = int(min(*w, maxIdemInflight))
	}
	gen := p.gen
	p.wg.Add(1)
	go p.read(st, gen)
	return true
}

// read hands the stream's answers to the sender until the stream fails.
func (p *IdempotentProducer) read(st *ctrlStream, gen uint64) {
	defer p.wg.Done()
	for {
		msg, err := readMessage(st.fr)
		select {
		case p.answers <- idemAnswer{gen: gen, msg: msg, err: err}:
		case <-p.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// dropStream aborts the current stream.
func (p *IdempotentProducer) dropStream() {
	if p.st != nil {
		p.st.abort()
		p.st = nil
		p.gen++
	}
}

// streamFailed puts every unanswered batch in doubt, before those already
// there (they were sent earlier), and drops the stream.
func (p *IdempotentProducer) streamFailed() {
	p.doubt = append(p.inflight, p.doubt...)
	p.inflight = nil
	p.dropStream()
}

// sendDoubt sends batches in doubt again while the window has room; false
// when the stream failed.
func (p *IdempotentProducer) sendDoubt() bool {
	for len(p.doubt) > 0 && len(p.inflight) < p.window {
		j := p.doubt[0]
		p.doubt = p.doubt[1:]
		if !p.write(j) {
			return false
		}
	}
	return true
}

// sendNew numbers j and sends it. sent is false when j was answered
// without sending (a failure it cannot be sent past); ok is false when the
// stream failed (j is then in doubt if it was written, or kept).
func (p *IdempotentProducer) sendNew(j *idemJob) (sent, ok bool) {
	if !j.numbered {
		if err := p.number(j); err != nil {
			if p.cur.dead() || errors.Is(err, ErrConnectionLost) {
				p.streamFailed()
				return false, false
			}
			j.res <- idemResult{err: err}
			return true, true
		}
	}
	return true, p.write(j)
}

// number gives j its producer id, shard and sequence, taking an id for
// the stream and learning its width first when needed.
func (p *IdempotentProducer) number(j *idemJob) error {
	key := j.ns + "/" + j.stream
	s := p.streams[key]
	if s == nil {
		s = &idemStream{seqs: map[uint32]uint64{}}
		p.streams[key] = s
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	if s.id == 0 {
		m := &wire.ProducerInit{TenantID: p.cfg.Tenant, Namespace: j.ns, Stream: j.stream}
		res, err := p.cur.requestCall(ctx, m, &m.RequestID)
		if err != nil {
			return err
		}
		ok, isOK := res.msg.(*wire.ProducerInitOK)
		if !isOK || ok.ProducerID == 0 {
			return fmt.Errorf("felix: producer_init answered with %s", typeOf(res.msg))
		}
		s.id, s.seqs = ok.ProducerID, map[uint32]uint64{}
		p.mu.Lock()
		p.ids[key] = s.id
		if p.first == 0 {
			p.first = s.id
		}
		p.mu.Unlock()
	}
	var shard uint32
	if j.key != nil {
		if s.width == 0 {
			w, err := p.cur.StreamShards(ctx, j.ns, j.stream)
			if err != nil {
				return fmt.Errorf("felix: an idempotent keyed publish needs the stream's width: %w", err)
			}
			if w == 0 {
				return notSent(fmt.Errorf("felix: the broker knows no stream %s/%s", j.ns, j.stream))
			}
			s.width = w
		}
		shard = wire.ShardForKey(j.key, s.width)
	}
	j.numbered, j.id, j.shard, j.seq = true, s.id, shard, s.seqs[shard]
	s.seqs[shard]++
	return nil
}

// write sends j on the stream and adds it to the unanswered; false when
// the stream failed (j is then in doubt). It goes as a binary frame
// (FLAG_BINARY_PUBLISH_IDEMPOTENT) when the broker advertised one and the
// batch needs no explicit shard, as publish_idempotent otherwise.
func (p *IdempotentProducer) write(j *idemJob) bool {
	c := p.cur
	explicit := j.key != nil && c.serverFeatures&wire.FeatureExplicitShard != 0
	if c.serverFlags&wire.FlagBinaryPublishIdempotent != 0 && !explicit {
		b := wire.BinaryPublish{RequestID: c.newRequestID(), ProducerID: j.id, Sequence: j.seq, Key: j.key,
			TenantID: p.cfg.Tenant, Namespace: j.ns, Stream: j.stream, Payloads: j.payloads}
		j.reqID = b.RequestID
		return p.writeFrame(j, b.AppendFrame(nil, wire.PublishFlags(true, j.key != nil)|wire.FlagBinaryPublishIdempotent), nil)
	}
	seq := j.seq
	m := &wire.PublishIdempotent{TenantID: p.cfg.Tenant, Namespace: j.ns, Stream: j.stream, Payloads: j.payloads,
		ProducerID: j.id, Sequence: &seq, RequestID: p.cur.newRequestID()}
	if explicit {
		shard := j.shard
		m.Shard = &shard // checked against the stream's width, never wrapped
	} else {
		m.Key = j.key
	}
	j.reqID = m.RequestID
	frame, err := wire.AppendMessageFrame(nil, m)
	return p.writeFrame(j, frame, err)
}

// writeFrame adds j to the unanswered and writes its frame (encoded with
// error err); false when the stream failed.
func (p *IdempotentProducer) writeFrame(j *idemJob, frame []byte, err error) bool {
	p.inflight = append(p.inflight, j)
	if err == nil {
		_, err = p.st.s.Write(frame)
	}
	if err != nil {
		p.streamFailed()
		return false
	}
	return true
}

// take removes and returns the unanswered batch of request id.
func (p *IdempotentProducer) take(id uint64) *idemJob {
	for i, j := range p.inflight {
		if j.reqID == id {
			p.inflight = append(p.inflight[:i], p.inflight[i+1:]...)
			return j
		}
	}
	return nil
}

// handle acts on one answer from the current stream.
func (p *IdempotentProducer) handle(a idemAnswer) {
	if a.err != nil {
		p.streamFailed()
		return
	}
	switch m := a.msg.(type) {
	case *wire.PublishOK:
		if j := p.take(m.RequestID); j != nil {
			p.backoff = 0
			if m.Offset == nil {
				j.res <- idemResult{err: fmt.Errorf("felix: the broker acknowledged an idempotent batch without its offset")}
				return
			}
			j.res <- idemResult{offset: *m.Offset}
		}
	case *wire.PublishRefused:
		if j := p.take(m.RequestID); j != nil {
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
		p.refused(&m.RequestID, m.Err())
	case *wire.ErrorMsg:
		p.refused(m.RequestID, m.Err())
	case *wire.NotLeader:
		if m.RequestID != nil {
			if j := p.take(*m.RequestID); j != nil {
				p.failed(j, notLeaderError(m))
			}
		}
	case *wire.Unsupported:
		if m.RequestID != nil {
			if j := p.take(*m.RequestID); j != nil {
				p.failed(j, unsupported(m.RequestType))
			}
		}
	}
}

// refused acts on an error answer: a class that says the batch may be sent
// again (retry, retry_after, outcome_unknown), and not_found for up to
// idemNotFoundPatience, puts everything unanswered in doubt and reopens
// the stream after a backoff; any other fails the batch it names, or
// every unanswered batch for an error naming none.
func (p *IdempotentProducer) refused(id *uint64, e *wire.Error) {
	transient := false
	switch e.Retry {
	case wire.RetryRetry, wire.RetryRetryAfter, wire.RetryOutcomeUnknown:
		transient = e.Code != wire.CodeNotLeader
	}
	if e.Code == wire.CodeNotFound && id != nil {
		for _, j := range p.inflight {
			if j.reqID == *id {
				if j.notFound.IsZero() {
					j.notFound = time.Now()
				}
				transient = time.Since(j.notFound) < idemNotFoundPatience
			}
		}
	}
	if transient {
		p.streamFailed()
		return
	}
	if id == nil {
		for _, j := range append(p.inflight, p.doubt...) {
			p.failed(j, brokerErrorFromWire(e))
		}
		p.inflight, p.doubt = nil, nil
		p.dropStream()
		return
	}
	if j := p.take(*id); j != nil {
		p.failed(j, brokerErrorFromWire(e))
	}
}

// failed answers j with err. j was not written, so the batches behind it
// on its shard will not be either (they meet a gap): the stream takes a
// fresh producer id for what comes next.
func (p *IdempotentProducer) failed(j *idemJob, err error) {
	j.res <- idemResult{err: err}
	if s := p.streams[j.ns+"/"+j.stream]; s != nil && s.id == j.id {
		s.id = 0
	}
}

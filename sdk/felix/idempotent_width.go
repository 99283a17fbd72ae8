package felix

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/felixmq/felix/wire"
)

// Width changes (FEATURE_PUBLISH_WIDTH).
//
// The producer numbers a stream's keyed batches per shard by the width it
// asked once, and each batch goes out declaring that width (publish_width
// on the producer's stream, before the batch), so a broker whose stream
// has another width refuses it with stale_width and writes nothing. The
// refusal drops the width; the next batch asks it again.
//
//   - A batch refused stale_width that never went unanswered was not
//     written. It waits, ahead of anything new, for the width to be asked
//     again: under the same width and producer id it goes out again as it
//     was; under a new width the stream's sequences start again under a
//     fresh producer id, and it is numbered afresh there, so new sequences
//     never meet those a leader still holds.
//   - A batch in doubt (a send of it went unanswered: it may have landed)
//     settles only by a re-send under the width and id that numbered it.
//     When that re-send is refused stale_width the batch is held and its
//     call fails with an *InDoubtError. While a batch of the stream is
//     held, or in doubt and being sent again, the stream is not numbered
//     afresh: each later call on it first sends the held batches again
//     (they settle if the width came back), then fails without sending,
//     with an *InDoubtError, while they are still held.
//   - AbandonInDoubt gives the stream's batches in doubt up (an abandoned
//     batch may have landed, and may land twice if published again) and
//     numbers the stream afresh under a new producer id.
//
// A broker without FEATURE_PUBLISH_WIDTH checks nothing: the width is
// kept until a not_found refusal drops it.

// ErrAbandoned answers a batch AbandonInDoubt gave up: it may have landed.
var ErrAbandoned = errors.New("felix: idempotent batch given up by AbandonInDoubt while in doubt; it may have landed")

// InDoubtError is an idempotent batch on a stream whose width changed
// while a batch on it was in doubt. Either the batch itself was in doubt
// (it may have landed) and its re-send under the width that numbered it
// was refused because the stream no longer has that width (NotSent
// false), or the call's batch was not sent because such batches wait on
// the stream (NotSent true). AbandonInDoubt gives them up.
type InDoubtError struct {
	Namespace, Stream string
	// Width is the width the batch in doubt was numbered by.
	Width uint32
	// InDoubt counts the stream's batches in doubt.
	InDoubt int
	// NotSent reports that this call's batch was not sent.
	NotSent bool
	// ProducerID, Sequence and Shard number the batch in doubt.
	ProducerID, Sequence uint64
	Shard                uint32
	// Err is the stale_width refusal (a *BrokerError), when one came.
	Err error
}

// Error implements error.
func (e *InDoubtError) Error() string {
	if e.NotSent {
		return fmt.Sprintf("felix: idempotent batch not sent: %d batch(es) on stream %s/%s are in doubt under width %d, which the stream no longer has; a re-send under a width that has gone is refused, so the stream is not numbered afresh until they settle (AbandonInDoubt gives them up)",
			e.InDoubt, e.Namespace, e.Stream, e.Width)
	}
	return fmt.Sprintf("felix: idempotent batch (producer %d, sequence %d on shard %d) is in doubt and may have landed: its re-send under width %d, which stream %s/%s no longer has, was refused (%v); AbandonInDoubt gives it up",
		e.ProducerID, e.Sequence, e.Shard, e.Width, e.Namespace, e.Stream, e.Err)
}

// Unwrap returns the stale_width refusal, if any.
func (e *InDoubtError) Unwrap() error { return e.Err }

// idemCtl is an AbandonInDoubt request to the sender.
type idemCtl struct {
	ns, stream string
	res        chan int
}

// AbandonInDoubt gives up the batches on namespace/stream that are in
// doubt (sent, unanswered, and not settled by a re-send, typically held
// because the stream's width changed): their calls, if still waiting,
// return ErrAbandoned, and they are sent no more. An abandoned batch may
// have landed, and lands twice if published again. The stream is then
// numbered afresh under a new producer id (ProducerIDFor returns it once
// it is taken, at the stream's next batch; ProducerID keeps the first).
// It returns how many batches were given up.
func (p *IdempotentProducer) AbandonInDoubt(ctx context.Context, namespace, stream string) (int, error) {
	c := idemCtl{ns: namespace, stream: stream, res: make(chan int, 1)}
	select {
	case p.ctl <- c:
	case <-p.done:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case n := <-c.res:
		return n, nil
	case <-p.done:
		return 0, ErrClosed
	}
}

// abandon is AbandonInDoubt on the sender.
func (p *IdempotentProducer) abandon(ns, stream string) int {
	key := ns + "/" + stream
	n := 0
	give := func(j *idemJob) bool {
		if j.abandoned || !j.maybeLanded || j.name != key {
			return false
		}
		j.abandoned = true
		j.answer(idemResult{err: ErrAbandoned})
		n++
		return true
	}
	p.doubt = slices.DeleteFunc(p.doubt, give)
	for _, l := range p.lanes {
		for _, j := range l.inflight {
			give(j) // its answer, when it comes, is dropped
		}
	}
	if s := p.streams[key]; s != nil {
		for _, j := range s.held {
			give(j)
		}
		s.held = nil
		s.id, s.width, s.widthOf, s.seqs = 0, 0, 0, map[uint32]uint64{}
	}
	p.mu.Lock()
	delete(p.ids, key)
	p.mu.Unlock()
	return n
}

// unsure counts the stream's batches in doubt: held, waiting to be sent
// again, or sent again and unanswered.
func (p *IdempotentProducer) unsure(key string) int {
	n := 0
	count := func(j *idemJob) {
		if j.maybeLanded && !j.abandoned && j.name == key {
			n++
		}
	}
	if s := p.streams[key]; s != nil {
		n += len(s.held)
	}
	for _, j := range p.doubt {
		count(j)
	}
	for _, l := range p.lanes {
		for _, j := range l.inflight {
			count(j)
		}
	}
	return n
}

// inDoubt is the refusal, without sending, of j while n batches of its
// stream are in doubt.
func (p *IdempotentProducer) inDoubt(j *idemJob, s *idemStream, n int) *InDoubtError {
	e := &InDoubtError{Namespace: j.ns, Stream: j.stream, InDoubt: n, NotSent: true, Width: s.widthOf}
	if len(s.held) > 0 {
		h := s.held[0]
		e.Width, e.ProducerID, e.Sequence, e.Shard = h.width, h.id, h.seq, h.shard
	}
	return e
}

// stream returns what the producer holds of j's stream, made on first use.
func (p *IdempotentProducer) stream(j *idemJob) *idemStream {
	key := j.name
	s := p.streams[key]
	if s == nil {
		s = &idemStream{seqs: map[uint32]uint64{}}
		p.streams[key] = s
	}
	return s
}

// widthRules runs before j (new, or refused stale_width) is numbered and
// sent: it answers j without sending while batches of its stream are
// held (after sending them again once before j), waits while those
// re-sends are unanswered, and decides whether j, refused stale_width,
// goes out again as it was (same width and id) or is numbered afresh.
// With hold set the caller returns sent and progressed as sendNew's
// (sent: j was answered; progressed: something changed worth another
// turn); otherwise it goes on to number and send j.
func (p *IdempotentProducer) widthRules(j *idemJob) (hold, sent, progressed bool) {
	key := j.name
	s := p.stream(j)
	if len(s.held) > 0 {
		if !j.retriedHeld {
			j.retriedHeld = true
			p.doubt = append(p.doubt, s.held...)
			s.held = nil
			slices.SortFunc(p.doubt, func(a, b *idemJob) int { return cmp.Compare(a.order, b.order) })
			return true, false, true
		}
		j.answer(idemResult{err: p.inDoubt(j, s, p.unsure(key))})
		return true, true, true
	}
	if j.retriedHeld && p.unsure(key) > 0 {
		return true, false, false // the held batches' re-sends are unanswered
	}
	if !j.numbered || j.width == 0 {
		return false, false, false
	}
	if s.width == 0 {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
		err := p.learnWidth(ctx, func() (*Client, error) { p.flushAll(); return p.router.entry(ctx) }, j, s)
		cancel()
		if err != nil {
			j.attempts++
			if p.ctx.Err() == nil && !isFatal(err) && j.attempts < idemNumberAttempts {
				p.grow()
				return true, false, p.pause()
			}
			j.answer(idemResult{err: err})
			return true, true, true
		}
	}
	if j.id != s.id || j.width != s.width {
		j.numbered = false // numbered afresh (number takes a fresh id under a new width)
	}
	return false, false, false
}

// staleWidth acts on j refused stale_width on l: nothing of this send was
// written. The stream's width is asked again. A batch in doubt is held
// and its call fails; any other waits in redo to go out again or be
// numbered afresh.
func (p *IdempotentProducer) staleWidth(l *idemLane, j *idemJob, e *wire.Error) {
	l.take(j.reqID)
	p.dropWidth(j)
	if j.abandoned {
		return
	}
	s := p.stream(j)
	if j.maybeLanded {
		s.held = append(s.held, j)
		j.answer(idemResult{err: &InDoubtError{Namespace: j.ns, Stream: j.stream, Width: j.width, InDoubt: p.unsure(j.name),
			ProducerID: j.id, Sequence: j.seq, Shard: j.shard, Err: brokerErrorFromWire(e)}})
		return
	}
	p.redo = append(p.redo, j)
	slices.SortFunc(p.redo, func(a, b *idemJob) int { return cmp.Compare(a.order, b.order) })
}

// dropWidth forgets the width j was numbered by, so that it is asked
// again.
func (p *IdempotentProducer) dropWidth(j *idemJob) {
	if s := p.streams[j.name]; s != nil && j.width != 0 && s.width == j.width {
		s.width = 0
	}
}

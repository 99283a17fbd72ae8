package felix

import (
	"context"
	"errors"
	"hash/fnv"

	"golang.org/x/sync/semaphore"

	"github.com/felixmq/felix/wire"
)

// Publish pool limits.
const (
	publishBudgetBytes = 64 << 20 // bytes queued or being written, all workers
	publishQueueLen    = 1024     // requests queued per worker
	maxCoalesceBytes   = 1 << 20  // one Write call carries at most about this much
)

// PublishResult is what an acknowledged publish learned from the broker.
// On a durable stream Offset is the offset of the first payload (the
// batch's payloads follow it in order), when the broker reports it;
// HasOffset is false otherwise, and always with AckNone.
type PublishResult struct {
	Offset    uint64
	HasOffset bool
}

// Publish sends one payload to namespace/stream. With AckNone it returns
// once the frame is queued for the stream's writer; otherwise it waits for
// the broker's answer (a refusal is a *BrokerError). Cancelling ctx stops
// the wait, not necessarily the publish.
func (c *Client) Publish(ctx context.Context, namespace, stream string, payload []byte, ack AckMode) error {
	_, err := c.PublishAcked(ctx, namespace, stream, payload, ack)
	return err
}

// PublishAcked is Publish, also returning the offset the broker assigned.
func (c *Client) PublishAcked(ctx context.Context, namespace, stream string, payload []byte, ack AckMode) (PublishResult, error) {
	return c.publish(ctx, &publishReq{namespace: namespace, stream: stream,
		payloads: [][]byte{payload}, single: true, ack: ack})
}

// PublishBatch sends several payloads as one batch; they land in order and
// together.
func (c *Client) PublishBatch(ctx context.Context, namespace, stream string, payloads [][]byte, ack AckMode) error {
	_, err := c.PublishBatchAcked(ctx, namespace, stream, payloads, ack)
	return err
}

// PublishBatchAcked is PublishBatch, also returning the offset of the
// batch's first payload.
func (c *Client) PublishBatchAcked(ctx context.Context, namespace, stream string, payloads [][]byte, ack AckMode) (PublishResult, error) {
	return c.publish(ctx, &publishReq{namespace: namespace, stream: stream, payloads: payloads, ack: ack})
}

// PublishKeyed sends one payload with a routing key that picks the
// stream's shard.
func (c *Client) PublishKeyed(ctx context.Context, namespace, stream string, key, payload []byte, ack AckMode) error {
	_, err := c.PublishKeyedAcked(ctx, namespace, stream, key, payload, ack)
	return err
}

// PublishKeyedAcked is PublishKeyed, also returning the offset the broker
// assigned on the key's shard.
func (c *Client) PublishKeyedAcked(ctx context.Context, namespace, stream string, key, payload []byte, ack AckMode) (PublishResult, error) {
	return c.publish(ctx, &publishReq{namespace: namespace, stream: stream, key: key,
		payloads: [][]byte{payload}, single: true, ack: ack})
}

// Finish waits until the broker has read every fire-and-forget publish
// queued before the call, and returns the failures those publishes met
// since the previous Finish: a stream that could not be opened, a stream or
// connection that failed with frames on it, a refusal the broker sent
// without a request id. To know the frames were read, Finish closes the
// send half of each publish stream that carried any and waits for the
// broker to end it; the next publish opens a fresh stream. Call Finish
// before Close, which drops anything not yet delivered.
func (c *Client) Finish(ctx context.Context) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	return c.pub.finish(ctx)
}

func (c *Client) publish(ctx context.Context, r *publishReq) (PublishResult, error) {
	if err := r.validate(c.cfg.MaxFrameBytes); err != nil {
		return PublishResult{}, err
	}
	if err := c.checkUsable(); err != nil {
		return PublishResult{}, err
	}
	var id uint64
	if r.ack != AckNone {
		id = c.newRequestID()
	}
	frame, err := c.encode(r, id)
	if err != nil {
		return PublishResult{}, notSent(err)
	}
	if len(frame)-wire.HeaderLen > int(c.cfg.MaxFrameBytes) {
		return PublishResult{}, invalidArg("encoded publish of %d bytes is larger than MaxFrameBytes %d", len(frame)-wire.HeaderLen, c.cfg.MaxFrameBytes)
	}
	res, err := c.pub.send(ctx, r.namespace, r.stream, frame, id)
	if err != nil {
		publishErrors.Inc()
		return PublishResult{}, err
	}
	publishTotal.Add(len(r.payloads))
	return res, nil
}

// publishPool spreads publishes over workers by stream, so one stream's
// publishes share one writer and one QUIC stream and stay in order.
type publishPool struct {
	c       *Client
	workers []*pubWorker
	budget  *semaphore.Weighted
}

func newPublishPool(c *Client) *publishPool {
	p := &publishPool{c: c, budget: semaphore.NewWeighted(publishBudgetBytes)}
	for range c.cfg.PublishStreams {
		w := newPubWorker(c, p)
		p.workers = append(p.workers, w)
		c.spawn(w.run)
	}
	return p
}

func (p *publishPool) pick(namespace, stream string) *pubWorker {
	h := fnv.New32a()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(stream))
	return p.workers[h.Sum32()%uint32(len(p.workers))]
}

// send queues frame on the stream's worker and, for an acked publish
// (id != 0), waits for the answer.
func (p *publishPool) send(ctx context.Context, namespace, stream string, frame []byte, id uint64) (PublishResult, error) {
	w := p.pick(namespace, stream)
	weight := min(int64(len(frame)), publishBudgetBytes)
	if err := p.budget.Acquire(ctx, weight); err != nil {
		return PublishResult{}, notSent(err)
	}
	r := &pubReq{frame: frame, id: id, ctx: ctx, weight: weight}
	var pending *pendingAck
	if id != 0 {
		pending = w.addPending(id)
	}
	select {
	case w.reqC <- r:
	case <-ctx.Done():
		p.budget.Release(weight)
		w.removePending(id)
		return PublishResult{}, notSent(ctx.Err())
	case <-p.c.closedC:
		p.budget.Release(weight)
		w.removePending(id)
		return PublishResult{}, notSent(p.c.failure(ErrClosed))
	}
	if id == 0 {
		return PublishResult{}, nil
	}
	select {
	case err := <-pending.resC:
		if err != nil {
			return PublishResult{}, err
		}
		off, ok := maybe(pending.offset)
		return PublishResult{Offset: off, HasOffset: ok}, nil
	case <-ctx.Done():
		w.removePending(id) // a late answer is discarded
		return PublishResult{}, ctx.Err()
	case <-p.c.closedC:
		w.removePending(id)
		return PublishResult{}, p.c.failure(ErrClosed)
	}
}

// finish sends a flush marker through every worker and waits for all.
func (p *publishPool) finish(ctx context.Context) error {
	markers := make([]chan error, 0, len(p.workers))
	for _, w := range p.workers {
		m := &pubReq{flushC: make(chan error, 1)}
		select {
		case w.reqC <- m:
			markers = append(markers, m.flushC)
		case <-ctx.Done():
			return ctx.Err()
		case <-p.c.closedC:
			return p.c.failure(ErrClosed)
		}
	}
	var errs []error
	for _, m := range markers {
		select {
		case err := <-m:
			errs = append(errs, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-p.c.closedC:
			return p.c.failure(ErrClosed)
		}
	}
	return errors.Join(errs...)
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/felixmq/felix/sdk/felix"
)

// idemMaxInFlight is what one IdempotentProducer keeps unanswered at
// most (the broker remembers 64 sequences per producer).
const idemMaxInFlight = 64

// idemSource is a client that makes idempotent producers.
type idemSource interface {
	pubClient
	IdempotentProducer(ctx context.Context) (*felix.IdempotentProducer, error)
}

// idemClient publishes through idempotent producers of its client, enough
// of them for the callers' batches in flight (one producer keeps at most
// idemMaxInFlight), the callers taking them in turn. The ack mode is
// ignored: every idempotent publish is acknowledged.
type idemClient struct {
	idemSource
	producers []*felix.IdempotentProducer
	next      atomic.Uint32
}

func newIdemClient(ctx context.Context, c pubClient, inflight int) (*idemClient, error) {
	src, ok := c.(idemSource)
	if !ok {
		return nil, fmt.Errorf("this client makes no idempotent producers")
	}
	ic := &idemClient{idemSource: src}
	for range max(1, (inflight+idemMaxInFlight-1)/idemMaxInFlight) {
		p, err := src.IdempotentProducer(ctx)
		if err != nil {
			ic.Close()
			return nil, fmt.Errorf("idempotent producer: %w", err)
		}
		ic.producers = append(ic.producers, p)
	}
	return ic, nil
}

func (ic *idemClient) producer() *felix.IdempotentProducer {
	return ic.producers[int(ic.next.Add(1)-1)%len(ic.producers)]
}

func (ic *idemClient) Publish(ctx context.Context, ns, stream string, payload []byte, _ felix.AckMode) error {
	_, err := ic.producer().Publish(ctx, ns, stream, payload)
	return err
}

func (ic *idemClient) PublishBatch(ctx context.Context, ns, stream string, payloads [][]byte, _ felix.AckMode) error {
	_, err := ic.producer().PublishBatch(ctx, ns, stream, nil, payloads)
	return err
}

func (ic *idemClient) PublishKeyed(ctx context.Context, ns, stream string, key, payload []byte, _ felix.AckMode) error {
	_, err := ic.producer().PublishKeyed(ctx, ns, stream, key, payload)
	return err
}

// Finish waits until the producers have had every batch answered.
func (ic *idemClient) Finish(ctx context.Context) error {
	var errs []error
	for _, p := range ic.producers {
		errs = append(errs, p.Close(ctx))
	}
	ic.producers = nil
	return errors.Join(append(errs, ic.idemSource.Finish(ctx))...)
}

// Close closes the producers left and the client.
func (ic *idemClient) Close() error {
	for _, p := range ic.producers {
		_ = p.Close(context.Background())
	}
	ic.producers = nil
	return ic.idemSource.Close()
}

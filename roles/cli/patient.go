package cli

import (
	"context"
	"errors"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// catalogWait is how long a command keeps retrying a request the broker
// answered with not_found. Brokers learn new streams and caches on their
// next catalog sync (every 500 ms by default), so a command run straight
// after `felix admin ... create` would otherwise fail for no lasting reason.
const catalogWait = 5 * time.Second

// patientClient retries not_found answers for up to catalogWait. Only
// requests that get an answer can be retried; fire-and-forget publishes
// pass straight through.
type patientClient struct{ brokerClient }

func retryNotFound[T any](ctx context.Context, f func() (T, error)) (T, error) {
	deadline := time.Now().Add(catalogWait)
	for {
		v, err := f()
		var be *felix.BrokerError
		if err == nil || !errors.As(err, &be) || be.Code != wire.CodeNotFound || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func retryNotFoundErr(ctx context.Context, f func() error) error {
	_, err := retryNotFound(ctx, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

func (c patientClient) Publish(ctx context.Context, ns, stream string, payload []byte, ack felix.AckMode) error {
	return retryNotFoundErr(ctx, func() error { return c.brokerClient.Publish(ctx, ns, stream, payload, ack) })
}

func (c patientClient) PublishKeyed(ctx context.Context, ns, stream string, key, payload []byte, ack felix.AckMode) error {
	return retryNotFoundErr(ctx, func() error { return c.brokerClient.PublishKeyed(ctx, ns, stream, key, payload, ack) })
}

func (c patientClient) SubscribeFrom(ctx context.Context, ns, stream string, o felix.SubscribeOptions) (eventSource, error) {
	return retryNotFound(ctx, func() (eventSource, error) { return c.brokerClient.SubscribeFrom(ctx, ns, stream, o) })
}

func (c patientClient) CachePut(ctx context.Context, ns, cache, key string, value []byte, ttl time.Duration) error {
	return retryNotFoundErr(ctx, func() error { return c.brokerClient.CachePut(ctx, ns, cache, key, value, ttl) })
}

func (c patientClient) CacheGet(ctx context.Context, ns, cache, key string) ([]byte, bool, error) {
	return retryLookup(ctx, func() ([]byte, bool, error) { return c.brokerClient.CacheGet(ctx, ns, cache, key) })
}

func (c patientClient) CacheDelete(ctx context.Context, ns, cache, key string) ([]byte, bool, error) {
	return retryLookup(ctx, func() ([]byte, bool, error) { return c.brokerClient.CacheDelete(ctx, ns, cache, key) })
}

func (c patientClient) Read(ctx context.Context, ns, stream string, shard uint32, from uint64, end *uint64, maxRecords int) (*felix.ReadPage, error) {
	return retryNotFound(ctx, func() (*felix.ReadPage, error) {
		return c.brokerClient.Read(ctx, ns, stream, shard, from, end, maxRecords)
	})
}

func (c patientClient) OffsetForTime(ctx context.Context, ns, stream string, shard uint32, t time.Time) (uint64, bool, error) {
	type got struct {
		off uint64
		ok  bool
	}
	g, err := retryNotFound(ctx, func() (got, error) {
		off, ok, err := c.brokerClient.OffsetForTime(ctx, ns, stream, shard, t)
		return got{off, ok}, err
	})
	return g.off, g.ok, err
}

// retryLookup is retryNotFound for calls that answer a value and whether
// it was there.
func retryLookup(ctx context.Context, f func() ([]byte, bool, error)) ([]byte, bool, error) {
	type got struct {
		v  []byte
		ok bool
	}
	g, err := retryNotFound(ctx, func() (got, error) {
		v, ok, err := f()
		return got{v, ok}, err
	})
	return g.v, g.ok, err
}

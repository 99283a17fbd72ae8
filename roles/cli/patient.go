package cli

import (
	"context"
	"errors"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// catalogWait is how long a command keeps retrying a request the broker
// refused for a passing reason. Brokers learn new streams and caches on
// their next catalog sync (every 500 ms by default), so a command run
// straight after `felix admin ... create` would otherwise fail with
// not_found for no lasting reason.
const catalogWait = 5 * time.Second

// retryPause is the wait between attempts when the refusal suggests none
// (detail.retry_after_ms).
const retryPause = 100 * time.Millisecond

// patientClient retries refusals worth waiting out for up to catalogWait.
// Only requests that get an answer can be retried; fire-and-forget
// publishes pass straight through.
type patientClient struct{ brokerClient }

// waitOut reports whether a refusal is worth waiting out on the same
// broker, by its retry class alone: retry and retry_after promise nothing
// was applied and the broker may accept the request later (not_found while
// it syncs its catalog, overloaded, a shard coming back). redirect needs
// another broker, which this one-broker client does not have; fatal will
// fail again; outcome_unknown may have been applied, and sending it again
// could apply it twice. It returns the wait the refusal suggests, if any.
func waitOut(err error) (time.Duration, bool) {
	var be *felix.BrokerError
	if !errors.As(err, &be) || !be.Retry.Retryable() || be.Retry == wire.RetryRedirect {
		return 0, false
	}
	we := &wire.Error{Detail: be.Detail}
	if we.NotInCatalog() { // the broker asked the catalog already
		return 0, false
	}
	d, _ := we.RetryAfter()
	return d, true
}

// retryPatiently calls f until it succeeds, fails in a way waiting cannot
// cure (waitOut), ctx ends, or catalogWait has passed; it returns the last
// answer. Between attempts it waits retryPause, or longer when the
// refusal asked for longer, but never past catalogWait.
func retryPatiently[T any](ctx context.Context, f func() (T, error)) (T, error) {
	deadline := time.Now().Add(catalogWait)
	for {
		v, err := f()
		if err == nil {
			return v, nil
		}
		wait, ok := waitOut(err)
		if !ok || !time.Now().Before(deadline) {
			return v, err
		}
		t := time.NewTimer(min(max(wait, retryPause), time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

func retryPatientlyErr(ctx context.Context, f func() error) error {
	_, err := retryPatiently(ctx, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

func (c patientClient) PublishAcked(ctx context.Context, ns, stream string, payload []byte, ack felix.AckMode) (felix.PublishResult, error) {
	return retryPatiently(ctx, func() (felix.PublishResult, error) {
		return c.brokerClient.PublishAcked(ctx, ns, stream, payload, ack)
	})
}

func (c patientClient) PublishKeyedAcked(ctx context.Context, ns, stream string, key, payload []byte, ack felix.AckMode) (felix.PublishResult, error) {
	return retryPatiently(ctx, func() (felix.PublishResult, error) {
		return c.brokerClient.PublishKeyedAcked(ctx, ns, stream, key, payload, ack)
	})
}

// A conditional publish is waited out like the conditional cache writes:
// an offset_mismatch is fatal and a lost answer outcome_unknown, so
// neither is sent again (waitOut).
func (c patientClient) PublishIf(ctx context.Context, ns, stream string, key []byte, payloads [][]byte, expected uint64) (uint64, error) {
	return retryPatiently(ctx, func() (uint64, error) {
		return c.brokerClient.PublishIf(ctx, ns, stream, key, payloads, expected)
	})
}

func (c patientClient) SubscribeFrom(ctx context.Context, ns, stream string, o felix.SubscribeOptions) (eventSource, error) {
	return retryPatiently(ctx, func() (eventSource, error) { return c.brokerClient.SubscribeFrom(ctx, ns, stream, o) })
}

func (c patientClient) CachePut(ctx context.Context, ns, cache, key string, value []byte, ttl time.Duration) error {
	return retryPatientlyErr(ctx, func() error { return c.brokerClient.CachePut(ctx, ns, cache, key, value, ttl) })
}

func (c patientClient) CacheGet(ctx context.Context, ns, cache, key string) ([]byte, bool, error) {
	return retryLookup(ctx, func() ([]byte, bool, error) { return c.brokerClient.CacheGet(ctx, ns, cache, key) })
}

func (c patientClient) CacheDelete(ctx context.Context, ns, cache, key string) ([]byte, bool, error) {
	return retryLookup(ctx, func() ([]byte, bool, error) { return c.brokerClient.CacheDelete(ctx, ns, cache, key) })
}

// Conditional writes are waited out like the others: a refusal of class
// retry or retry_after promises nothing was applied, and an outcome that
// may have been applied is never sent again (waitOut).
func (c patientClient) CachePutIf(ctx context.Context, ns, cache, key string, value []byte, ttl time.Duration, cond felix.CacheCondition) (felix.CondResult, error) {
	return retryPatiently(ctx, func() (felix.CondResult, error) {
		return c.brokerClient.CachePutIf(ctx, ns, cache, key, value, ttl, cond)
	})
}

func (c patientClient) CacheDeleteIf(ctx context.Context, ns, cache, key string, version uint64) (felix.CondResult, error) {
	return retryPatiently(ctx, func() (felix.CondResult, error) {
		return c.brokerClient.CacheDeleteIf(ctx, ns, cache, key, version)
	})
}

func (c patientClient) CacheGetVersioned(ctx context.Context, ns, cache, key string) ([]byte, uint64, bool, error) {
	type got struct {
		v   []byte
		ver uint64
		ok  bool
	}
	g, err := retryPatiently(ctx, func() (got, error) {
		v, ver, ok, err := c.brokerClient.CacheGetVersioned(ctx, ns, cache, key)
		return got{v, ver, ok}, err
	})
	return g.v, g.ver, g.ok, err
}

func (c patientClient) Read(ctx context.Context, ns, stream string, shard uint32, from uint64, end *uint64, maxRecords int) (*felix.ReadPage, error) {
	return retryPatiently(ctx, func() (*felix.ReadPage, error) {
		return c.brokerClient.Read(ctx, ns, stream, shard, from, end, maxRecords)
	})
}

func (c patientClient) OffsetForTime(ctx context.Context, ns, stream string, shard uint32, t time.Time) (uint64, bool, error) {
	type got struct {
		off uint64
		ok  bool
	}
	g, err := retryPatiently(ctx, func() (got, error) {
		off, ok, err := c.brokerClient.OffsetForTime(ctx, ns, stream, shard, t)
		return got{off, ok}, err
	})
	return g.off, g.ok, err
}

// retryLookup is retryPatiently for calls that answer a value and whether
// it was there.
func retryLookup(ctx context.Context, f func() ([]byte, bool, error)) ([]byte, bool, error) {
	type got struct {
		v  []byte
		ok bool
	}
	g, err := retryPatiently(ctx, func() (got, error) {
		v, ok, err := f()
		return got{v, ok}, err
	})
	return g.v, g.ok, err
}

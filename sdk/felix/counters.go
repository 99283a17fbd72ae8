package felix

import (
	"context"
	"errors"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Counters (FEATURE_COUNTERS).
//
// A counter is a signed 64-bit sum under a key of a cache, scoped and
// routed like that cache key but apart from its value. CounterAdd applies
// a delta and returns the sum including it; CounterGet returns the sum,
// with ok false when the counter was never written (which is not a sum
// of 0). Counters are durable only: a broker without storage does not
// advertise the bit, and both calls then fail with a *BrokerError of code
// unsupported, sending nothing. A sum that would overflow int64 is
// refused (invalid_request, reason counter_overflow) and adds nothing.
//
// At-least-once: an add whose answer was lost (the connection failed
// after it was sent) may have been applied. It fails with a *BrokerError
// of retry class outcome_unknown and this package never sends it again;
// sending it yourself may count it twice.

// CounterAdd adds delta to the counter key of cache and returns the sum
// including it, once the delta is durable under the cache's fsync policy.
func (c *Client) CounterAdd(ctx context.Context, namespace, cache, key string, delta int64) (int64, error) {
	if err := c.needFeature(wire.FeatureCounters, "counter_add (FEATURE_COUNTERS; counters need a broker with durable storage)"); err != nil {
		return 0, err
	}
	m := &wire.CounterAdd{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key, Delta: &delta}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		if !wasNotSent(err) && errors.Is(err, ErrConnectionLost) {
			return 0, writeOutcomeUnknown("counter_add", err)
		}
		return 0, err
	}
	v, ok := res.msg.(*wire.CounterValue)
	if !ok {
		return 0, fmt.Errorf("felix: counter_add answered with %T", res.msg)
	}
	if v.Value == nil {
		return 0, fmt.Errorf("felix: counter_add of %q answered without a sum", key)
	}
	return *v.Value, nil
}

// CounterGet returns the sum of the counter key of cache; ok is false
// when it was never written.
func (c *Client) CounterGet(ctx context.Context, namespace, cache, key string) (sum int64, ok bool, err error) {
	if err := c.needFeature(wire.FeatureCounters, "counter_get (FEATURE_COUNTERS; counters need a broker with durable storage)"); err != nil {
		return 0, false, err
	}
	m := &wire.CounterGet{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return 0, false, err
	}
	v, isValue := res.msg.(*wire.CounterValue)
	if !isValue {
		return 0, false, fmt.Errorf("felix: counter_get answered with %T", res.msg)
	}
	if v.Value == nil {
		return 0, false, nil
	}
	return *v.Value, true, nil
}

// CounterAdd is Client.CounterAdd on the key's owner. It is sent again
// only when the first attempt never left the client, or the broker
// refused it saying nothing was applied (not_leader, retry, redirect); a
// lost answer, or an entry broker's outcome_unknown, is returned as it
// is, never re-sent.
func (cc *ClusterClient) CounterAdd(ctx context.Context, namespace, cache, key string, delta int64) (sum int64, err error) {
	err = cc.doRouted(ctx, cacheRoute(namespace, cache, key), wasNotSent, func(c *Client) (err error) {
		sum, err = c.CounterAdd(ctx, namespace, cache, key, delta)
		return err
	})
	return sum, err
}

// CounterGet is Client.CounterGet on the key's owner; reading changes
// nothing, so a failed get is asked again once, like CacheGet.
func (cc *ClusterClient) CounterGet(ctx context.Context, namespace, cache, key string) (sum int64, ok bool, err error) {
	err = cc.doRouted(ctx, cacheRoute(namespace, cache, key), always, func(c *Client) (err error) {
		sum, ok, err = c.CounterGet(ctx, namespace, cache, key)
		return err
	})
	return sum, ok, err
}

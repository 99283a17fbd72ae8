package felix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// Conditional cache writes (FEATURE_CACHE_CONDITIONAL).
//
// A value's version is the offset of the put that wrote it. CachePutIf
// writes only if the key is absent or at the version the caller read;
// CacheDeleteIf removes it only at a version. A refused condition is an
// answer (Applied false, with the key's current version), not an error.
// A conditional write whose answer was lost (the connection failed after
// it was sent) may have been applied: it fails with a *BrokerError of
// retry class outcome_unknown and is never sent again by this package;
// read the key (CacheGetVersioned) to learn what happened.

// CacheCondition is what CachePutIf requires of its key. Use IfAbsent or
// IfVersion.
type CacheCondition struct {
	// Absent: the key has no live entry. Otherwise its live entry must be
	// at Version.
	Absent  bool
	Version uint64
}

// IfAbsent is the condition "the key has no live entry": how to take a
// lease or claim an idempotency key.
func IfAbsent() CacheCondition { return CacheCondition{Absent: true} }

// IfVersion is the condition "the key's live entry is at version v": a
// compare-and-set after a CacheGetVersioned.
func IfVersion(v uint64) CacheCondition { return CacheCondition{Version: v} }

// CondResult is the answer to a conditional write. Applied, Version is the
// version the put wrote (HasVersion false after an applied delete, which
// leaves the key without one). Refused, Version is the key's current
// version, and HasVersion is false when the key has no live entry.
type CondResult struct {
	Applied    bool
	Version    uint64
	HasVersion bool
}

// CachePutIf stores value under key only if cond holds; ttl 0 means no
// expiry. It needs a broker that advertised FEATURE_CACHE_CONDITIONAL;
// otherwise it fails with a *BrokerError of code unsupported, sending
// nothing.
func (c *Client) CachePutIf(ctx context.Context, namespace, cache, key string, value []byte, ttl time.Duration, cond CacheCondition) (CondResult, error) {
	if err := c.needFeature(wire.FeatureCacheConditional, "cache_put_if (FEATURE_CACHE_CONDITIONAL)"); err != nil {
		return CondResult{}, err
	}
	if ttl < 0 {
		return CondResult{}, invalidArg("negative ttl %v", ttl)
	}
	wc := wire.CacheCondition{Absent: cond.Absent, Version: cond.Version}
	m := &wire.CachePutIf{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key, Value: nonNil(value), Condition: &wc}
	if ttl > 0 {
		ms := uint64((ttl + time.Millisecond - 1) / time.Millisecond)
		m.TTLMs = &ms
	}
	return c.condCall(ctx, "cache_put_if", m, &m.RequestID)
}

// CacheDeleteIf removes key only if its live entry is at version. It needs
// FEATURE_CACHE_CONDITIONAL, as CachePutIf does.
func (c *Client) CacheDeleteIf(ctx context.Context, namespace, cache, key string, version uint64) (CondResult, error) {
	if err := c.needFeature(wire.FeatureCacheConditional, "cache_delete_if (FEATURE_CACHE_CONDITIONAL)"); err != nil {
		return CondResult{}, err
	}
	m := &wire.CacheDeleteIf{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key, Version: &version}
	return c.condCall(ctx, "cache_delete_if", m, &m.RequestID)
}

// CacheGetVersioned reads key with its version (the offset of the put that
// wrote it), for a later CachePutIf(IfVersion) or CacheDeleteIf. found is
// false when the key is absent or expired. It is a cache_get to a broker
// that advertised FEATURE_CACHE_CONDITIONAL (this client offers the bit,
// so the answer carries the version); without the bit it fails with code
// unsupported, sending nothing.
func (c *Client) CacheGetVersioned(ctx context.Context, namespace, cache, key string) (value []byte, version uint64, found bool, err error) {
	if err := c.needFeature(wire.FeatureCacheConditional, "versioned cache gets (FEATURE_CACHE_CONDITIONAL)"); err != nil {
		return nil, 0, false, err
	}
	m := &wire.CacheGet{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return nil, 0, false, err
	}
	v, ok := res.msg.(*wire.CacheValue)
	switch {
	case !ok:
		return nil, 0, false, fmt.Errorf("felix: cache_get answered with %T", res.msg)
	case v.Value == nil:
		return nil, 0, false, nil
	case v.Version == nil:
		return nil, 0, false, fmt.Errorf("felix: the broker sent key %q without its version", key)
	}
	return v.Value, *v.Version, true, nil
}

// condCall runs a conditional write. One that may have reached the broker
// but whose answer was lost with the connection is reported outcome
// unknown.
func (c *Client) condCall(ctx context.Context, what string, m wire.Message, idField *uint64) (CondResult, error) {
	res, err := c.requestCall(ctx, m, idField)
	if err != nil {
		if !wasNotSent(err) && errors.Is(err, ErrConnectionLost) {
			return CondResult{}, writeOutcomeUnknown(what, err)
		}
		return CondResult{}, err
	}
	r, ok := res.msg.(*wire.CacheConditionResult)
	if !ok {
		return CondResult{}, fmt.Errorf("felix: %s answered with %T", what, res.msg)
	}
	out := CondResult{Applied: r.Applied, HasVersion: r.Version != nil}
	if r.Version != nil {
		out.Version = *r.Version
	}
	return out, nil
}

// writeOutcomeUnknown reports a write whose answer never came because its
// stream or connection failed after it was sent: it may have been applied.
func writeOutcomeUnknown(what string, cause error) *BrokerError {
	return &BrokerError{Code: wire.CodeInternal, Retry: wire.RetryOutcomeUnknown,
		Message: "no answer before the connection failed; the " + what + " may have been applied: " + cause.Error(),
		cause:   cause}
}

// CachePutIf is Client.CachePutIf on the key's owner. It is sent again
// only when the first attempt never left the client, or the broker
// refused it saying nothing was applied (not_leader, retry, redirect); a
// lost answer, or an entry broker's outcome_unknown, is returned as it is.
func (cc *ClusterClient) CachePutIf(ctx context.Context, namespace, cache, key string, value []byte, ttl time.Duration, cond CacheCondition) (res CondResult, err error) {
	err = cc.doRouted(ctx, cacheRoute(namespace, cache, key), wasNotSent, func(c *Client) (err error) {
		res, err = c.CachePutIf(ctx, namespace, cache, key, value, ttl, cond)
		return err
	})
	return res, err
}

// CacheDeleteIf is Client.CacheDeleteIf on the key's owner, sent again
// only as CachePutIf is.
func (cc *ClusterClient) CacheDeleteIf(ctx context.Context, namespace, cache, key string, version uint64) (res CondResult, err error) {
	err = cc.doRouted(ctx, cacheRoute(namespace, cache, key), wasNotSent, func(c *Client) (err error) {
		res, err = c.CacheDeleteIf(ctx, namespace, cache, key, version)
		return err
	})
	return res, err
}

// CacheGetVersioned is Client.CacheGetVersioned on the key's owner;
// reading changes nothing, so it is retried like CacheGet.
func (cc *ClusterClient) CacheGetVersioned(ctx context.Context, namespace, cache, key string) (value []byte, version uint64, found bool, err error) {
	err = cc.doRouted(ctx, cacheRoute(namespace, cache, key), always, func(c *Client) (err error) {
		value, version, found, err = c.CacheGetVersioned(ctx, namespace, cache, key)
		return err
	})
	return value, version, found, err
}

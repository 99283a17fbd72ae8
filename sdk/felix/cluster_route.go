package felix

import (
	"context"
	"errors"
	"time"

	"github.com/felixmq/felix/wire"
)

// route is where one call goes: a shard of a stream or cache, found by
// key or named outright.
type route struct {
	k     ownerKey
	key   []byte // the routing key; nil when shard is named
	shard uint32
}

func streamRoute(ns, stream string, key []byte, shard uint32) route {
	return route{k: ownerKey{kind: KindStream, namespace: ns, name: stream}, key: key, shard: shard}
}

func cacheRoute(ns, cache, key string) route {
	return route{k: ownerKey{kind: KindCache, namespace: ns, name: cache}, key: []byte(key)}
}

// target returns the owner's address and the shard the call is for, or
// "" when the owner is unknown.
func (cc *ClusterClient) target(ctx context.Context, r route, fresh bool) (addr string, shard uint32) {
	if cc.owners == nil {
		return "", r.shard
	}
	var o owners
	if fresh {
		o = cc.owners.refresh(ctx, r.k)
	} else {
		o = cc.owners.lookup(ctx, r.k)
	}
	shard = r.shard
	if r.key != nil && o.shards > 0 {
		shard = wire.ShardForKey(r.key, o.shards)
	}
	return o.addr(shard), shard
}

// routedClient returns the connection to r's owner, or the entry
// connection when the owner is unknown or cannot be reached (the entry
// broker forwards). owned says which it is; shard is r's shard.
func (cc *ClusterClient) routedClient(ctx context.Context, r route, fresh bool) (c *Client, shard uint32, owned bool, err error) {
	addr, shard := cc.target(ctx, r, fresh)
	if addr != "" {
		if c, err := cc.clientAt(ctx, addr); err == nil {
			return c, shard, true, nil
		}
		cc.owners.drop(r.k, shard)
	}
	c, err = cc.client(ctx)
	return c, shard, false, err
}

// doRouted runs op on r's owner (see routedClient). A lost connection is
// replaced and op runs once more when retry allows it; a refusal that
// says another broker owns the shard, or that nothing was applied and a
// retry may work, drops the owner and op runs once more after the owners
// are asked again.
func (cc *ClusterClient) doRouted(ctx context.Context, r route, retry func(error) bool, op func(*Client) error) error {
	c, shard, owned, err := cc.routedClient(ctx, r, false)
	if err != nil {
		return err
	}
	err = op(c)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// No answer before the caller's deadline: the broker may have
		// died without a word (QUIC notices only at its idle timeout).
		cc.suspect(c)
		return err
	case errors.Is(err, ErrConnectionLost):
		cc.invalidate(c)
		if owned {
			cc.owners.drop(r.k, shard)
		}
		if !retry(err) {
			return err
		}
	case redirectable(err):
		if owned {
			cc.owners.drop(r.k, shard)
		}
	default:
		return err
	}
	c, _, _, err2 := cc.routedClient(ctx, r, true)
	if err2 != nil {
		return err2
	}
	return op(c)
}

// redirectable reports a refusal that says nothing was applied and the
// shard is better asked elsewhere or again: not_leader,
// shard_unavailable, or the retry classes retry and redirect, but never
// one of retry class outcome_unknown.
func redirectable(err error) bool {
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		return true
	}
	var be *BrokerError
	if !errors.As(err, &be) {
		return false
	}
	if be.Retry == wire.RetryOutcomeUnknown {
		// An entry broker whose forward went unanswered: the request may
		// have been applied, so it is never sent again.
		return false
	}
	return be.Code == wire.CodeNotLeader || be.Code == wire.CodeShardUnavailable ||
		be.Retry == wire.RetryRetry || be.Retry == wire.RetryRedirect
}

// publish runs a publish on its shard's owner. A publish that may have
// been applied is never sent twice: an acknowledged publish lost in
// flight is reported as outcome unknown.
func (cc *ClusterClient) publish(ctx context.Context, ack AckMode, r route, op func(*Client) error) error {
	err := cc.doRouted(ctx, r, wasNotSent, op)
	var be *BrokerError
	if err != nil && ack != AckNone && errors.Is(err, ErrConnectionLost) && !wasNotSent(err) && !errors.As(err, &be) {
		return outcomeUnknown(err)
	}
	return err
}

// Publish is Client.Publish on the owner of the stream's shard 0.
func (cc *ClusterClient) Publish(ctx context.Context, namespace, stream string, payload []byte, ack AckMode) error {
	return cc.publish(ctx, ack, streamRoute(namespace, stream, nil, 0), func(c *Client) error {
		return c.Publish(ctx, namespace, stream, payload, ack)
	})
}

// PublishBatch is Client.PublishBatch on the owner of shard 0.
func (cc *ClusterClient) PublishBatch(ctx context.Context, namespace, stream string, payloads [][]byte, ack AckMode) error {
	return cc.publish(ctx, ack, streamRoute(namespace, stream, nil, 0), func(c *Client) error {
		return c.PublishBatch(ctx, namespace, stream, payloads, ack)
	})
}

// PublishKeyed is Client.PublishKeyed on the owner of the key's shard.
func (cc *ClusterClient) PublishKeyed(ctx context.Context, namespace, stream string, key, payload []byte, ack AckMode) error {
	return cc.publish(ctx, ack, streamRoute(namespace, stream, key, 0), func(c *Client) error {
		return c.PublishKeyed(ctx, namespace, stream, key, payload, ack)
	})
}

// PublishAcked is Client.PublishAcked on the owner of shard 0.
func (cc *ClusterClient) PublishAcked(ctx context.Context, namespace, stream string, payload []byte, ack AckMode) (res PublishResult, err error) {
	err = cc.publish(ctx, ack, streamRoute(namespace, stream, nil, 0), func(c *Client) (err error) {
		res, err = c.PublishAcked(ctx, namespace, stream, payload, ack)
		return err
	})
	return res, err
}

// PublishBatchAcked is Client.PublishBatchAcked on the owner of shard 0.
func (cc *ClusterClient) PublishBatchAcked(ctx context.Context, namespace, stream string, payloads [][]byte, ack AckMode) (res PublishResult, err error) {
	err = cc.publish(ctx, ack, streamRoute(namespace, stream, nil, 0), func(c *Client) (err error) {
		res, err = c.PublishBatchAcked(ctx, namespace, stream, payloads, ack)
		return err
	})
	return res, err
}

// PublishKeyedAcked is Client.PublishKeyedAcked on the owner of the
// key's shard.
func (cc *ClusterClient) PublishKeyedAcked(ctx context.Context, namespace, stream string, key, payload []byte, ack AckMode) (res PublishResult, err error) {
	err = cc.publish(ctx, ack, streamRoute(namespace, stream, key, 0), func(c *Client) (err error) {
		res, err = c.PublishKeyedAcked(ctx, namespace, stream, key, payload, ack)
		return err
	})
	return res, err
}

// Read is Client.Read on the shard's owner; reading changes nothing, so
// it is retried after a reconnect or a redirect.
func (cc *ClusterClient) Read(ctx context.Context, namespace, stream string, shard uint32, from uint64, end *uint64, maxRecords int) (page *ReadPage, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), always, func(c *Client) (err error) {
		page, err = c.Read(ctx, namespace, stream, shard, from, end, maxRecords)
		return err
	})
	return page, err
}

// OffsetForTime is Client.OffsetForTime on the shard's owner, retried
// like Read.
func (cc *ClusterClient) OffsetForTime(ctx context.Context, namespace, stream string, shard uint32, t time.Time) (offset uint64, ok bool, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), always, func(c *Client) (err error) {
		offset, ok, err = c.OffsetForTime(ctx, namespace, stream, shard, t)
		return err
	})
	return offset, ok, err
}

// CachePut is Client.CachePut on the key's owner; a put is retried after
// a reconnect, since writing the same value twice leaves the same state.
func (cc *ClusterClient) CachePut(ctx context.Context, namespace, cache, key string, value []byte, ttl time.Duration) error {
	return cc.doRouted(ctx, cacheRoute(namespace, cache, key), always, func(c *Client) error {
		return c.CachePut(ctx, namespace, cache, key, value, ttl)
	})
}

// CacheGet is Client.CacheGet on the key's owner.
func (cc *ClusterClient) CacheGet(ctx context.Context, namespace, cache, key string) (value []byte, found bool, err error) {
	err = cc.doRouted(ctx, cacheRoute(namespace, cache, key), always, func(c *Client) (err error) {
		value, found, err = c.CacheGet(ctx, namespace, cache, key)
		return err
	})
	return value, found, err
}

// CacheDelete is Client.CacheDelete on the key's owner; it is retried
// after a lost connection only when the first attempt never left the
// client, since a repeat would report the key gone.
func (cc *ClusterClient) CacheDelete(ctx context.Context, namespace, cache, key string) (value []byte, found bool, err error) {
	err = cc.doRouted(ctx, cacheRoute(namespace, cache, key), wasNotSent, func(c *Client) (err error) {
		value, found, err = c.CacheDelete(ctx, namespace, cache, key)
		return err
	})
	return value, found, err
}

// openRouted opens a stream (a subscription, a watch) on r's owner, or on
// hint when set, following not_leader answers to the broker they name, up
// to maxRedirects hops. An owner that cannot be reached is replaced by the
// entry broker. A lost connection is dropped and returned.
func openRouted[S any](ctx context.Context, cc *ClusterClient, r route, hint string, open func(*Client) (S, error)) (S, error) {
	var zero S
	addr, shard := hint, r.shard
	if addr == "" {
		addr, shard = cc.target(ctx, r, false)
	}
	for hop := 0; ; hop++ {
		c, err := cc.ownerOrEntry(ctx, r.k, shard, addr)
		if err != nil {
			return zero, err
		}
		s, err := open(c)
		var nl *NotLeaderError
		switch {
		case err == nil:
			return s, nil
		case errors.Is(err, ErrConnectionLost):
			cc.invalidate(c)
		case errors.As(err, &nl) && nl.Addr != "" && hop < maxRedirects:
			if cc.owners != nil {
				cc.owners.learn(r.k, shard, nl.Addr)
			}
			addr = nl.Addr
			// A broker that names addr as the owner is news that addr
			// serves: a dial that failed there moments ago (it was
			// restarting) must not send the open back to the entry,
			// which would only redirect it again.
			cc.forgetFailedDial(addr)
			continue
		case redirectable(err) && cc.owners != nil:
			cc.owners.drop(r.k, shard)
		}
		return zero, err
	}
}

// ownerOrEntry returns the connection to addr, or the entry connection
// when addr is "" or cannot be reached.
func (cc *ClusterClient) ownerOrEntry(ctx context.Context, k ownerKey, shard uint32, addr string) (*Client, error) {
	if addr != "" {
		c, err := cc.clientAt(ctx, addr)
		if err == nil {
			return c, nil
		}
		if cc.owners != nil {
			cc.owners.drop(k, shard)
		}
	}
	return cc.client(ctx)
}

// openRetried is openRouted run once more when the connection was lost:
// opening a stream applies nothing.
func openRetried[S any](ctx context.Context, cc *ClusterClient, r route, open func(*Client) (S, error)) (S, error) {
	s, err := openRouted(ctx, cc, r, "", open)
	if err != nil && errors.Is(err, ErrConnectionLost) {
		return openRouted(ctx, cc, r, "", open)
	}
	return s, err
}

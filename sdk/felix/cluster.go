package felix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// ClusterClient talks to a cluster through one broker connection at a
// time, picked from seeds. When the connection dies, the next call
// replaces it with a connection to the next reachable seed and is retried
// there once when that cannot duplicate anything: a call that never left
// the client, a cache get or put, or a subscribe. An acknowledged publish
// whose answer was lost is not re-sent; it fails with a *BrokerError of
// code internal and retry class outcome_unknown. Subscribe and
// SubscribeFrom return a ClusterSubscription, which resumes a durable
// stream's subscription by itself after a lag or a lost connection; on a
// stream without offsets it ends with ErrSubscriptionLost when its
// connection dies. Read and OffsetForTime are retried like cache gets.
type ClusterClient struct {
	seeds []string
	cfg   Config

	// Backoff between failed resubscribes of a ClusterSubscription.
	resumeBase, resumeMax time.Duration

	features atomic.Uint64 // server_features of the last connection made

	// id is set on a ClusterClient made by WithIdentity: it borrows the
	// gateway's connections instead of dialing its own.
	id *identity

	mu     sync.Mutex
	cur    *Client // nil before the first connect and after a failure
	curIdx int     // index in seeds of cur, or of the last seed tried
	closed bool
}

// ConnectCluster connects to the first reachable seed, in order. cfg.Addr
// is ignored; every other field applies to each connection.
func ConnectCluster(ctx context.Context, seeds []string, cfg Config) (*ClusterClient, error) {
	if len(seeds) == 0 {
		return nil, errors.New("felix: ConnectCluster needs at least one seed")
	}
	cc := &ClusterClient{seeds: append([]string(nil), seeds...), cfg: cfg, curIdx: -1,
		resumeBase: resumeBackoffBase, resumeMax: resumeBackoffMax}
	if _, err := cc.client(ctx); err != nil {
		return nil, err
	}
	return cc, nil
}

// Addr returns the address of the broker currently connected, or "".
func (cc *ClusterClient) Addr() string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.cur == nil {
		return ""
	}
	return cc.seeds[cc.curIdx]
}

// client returns a live connection, replacing a dead one.
func (cc *ClusterClient) client(ctx context.Context) (*Client, error) {
	if cc.id != nil {
		return cc.handleClient(ctx)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return nil, notSent(ErrClosed)
	}
	if cc.cur != nil && !cc.cur.dead() {
		return cc.cur, nil
	}
	return cc.reconnectLocked(ctx)
}

// reconnectLocked drops the current connection and tries each seed once,
// starting after the one that failed.
func (cc *ClusterClient) reconnectLocked(ctx context.Context) (*Client, error) {
	if old := cc.cur; old != nil {
		cc.cur = nil
		old.shutdown(ErrSubscriptionLost)
		reconnects.Inc()
	}
	var errs []error
	for i := 1; i <= len(cc.seeds); i++ {
		idx := (cc.curIdx + i) % len(cc.seeds)
		cfg := cc.cfg
		cfg.Addr = cc.seeds[idx]
		c, err := Connect(ctx, cfg)
		if err == nil {
			cc.cur, cc.curIdx = c, idx
			cc.features.Store(c.ServerFeatures())
			return c, nil
		}
		errs = append(errs, fmt.Errorf("seed %s: %w", cfg.Addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	if cc.curIdx < 0 {
		cc.curIdx = len(cc.seeds) - 1 // next attempt starts at seed 0 again
	}
	return nil, notSent(fmt.Errorf("%w: no seed reachable: %w", ErrConnectionLost, errors.Join(errs...)))
}

// invalidate drops c if it is still the current connection.
func (cc *ClusterClient) invalidate(c *Client) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.cur == c {
		cc.cur = nil
		c.shutdown(ErrSubscriptionLost)
		if cc.id != nil {
			cc.id.gateway.invalidate(c.parent) // the connection they share is gone
			return
		}
		reconnects.Inc()
	}
}

// do runs op on the current connection. If it fails because the
// connection is gone, the connection is replaced and op runs once more
// when retry says that is safe.
func (cc *ClusterClient) do(ctx context.Context, retry func(error) bool, op func(*Client) error) error {
	c, err := cc.client(ctx)
	if err != nil {
		return err
	}
	err = op(c)
	if err == nil || !errors.Is(err, ErrConnectionLost) {
		return err
	}
	cc.invalidate(c)
	if !retry(err) {
		return err
	}
	c, err2 := cc.client(ctx)
	if err2 != nil {
		return err2
	}
	return op(c)
}

func always(error) bool { return true }

// publishRetry allows a retry only when nothing was sent; an acked publish
// lost in flight is reported as outcome unknown.
func (cc *ClusterClient) publish(ctx context.Context, ack AckMode, op func(*Client) error) error {
	err := cc.do(ctx, wasNotSent, op)
	var be *BrokerError
	if err != nil && ack != AckNone && errors.Is(err, ErrConnectionLost) && !wasNotSent(err) && !errors.As(err, &be) {
		return outcomeUnknown(err)
	}
	return err
}

// Publish is Client.Publish on the current connection.
func (cc *ClusterClient) Publish(ctx context.Context, namespace, stream string, payload []byte, ack AckMode) error {
	return cc.publish(ctx, ack, func(c *Client) error { return c.Publish(ctx, namespace, stream, payload, ack) })
}

// PublishBatch is Client.PublishBatch on the current connection.
func (cc *ClusterClient) PublishBatch(ctx context.Context, namespace, stream string, payloads [][]byte, ack AckMode) error {
	return cc.publish(ctx, ack, func(c *Client) error { return c.PublishBatch(ctx, namespace, stream, payloads, ack) })
}

// PublishKeyed is Client.PublishKeyed on the current connection.
func (cc *ClusterClient) PublishKeyed(ctx context.Context, namespace, stream string, key, payload []byte, ack AckMode) error {
	return cc.publish(ctx, ack, func(c *Client) error { return c.PublishKeyed(ctx, namespace, stream, key, payload, ack) })
}

// PublishAcked is Client.PublishAcked on the current connection.
func (cc *ClusterClient) PublishAcked(ctx context.Context, namespace, stream string, payload []byte, ack AckMode) (res PublishResult, err error) {
	err = cc.publish(ctx, ack, func(c *Client) (err error) {
		res, err = c.PublishAcked(ctx, namespace, stream, payload, ack)
		return err
	})
	return res, err
}

// PublishBatchAcked is Client.PublishBatchAcked on the current connection.
func (cc *ClusterClient) PublishBatchAcked(ctx context.Context, namespace, stream string, payloads [][]byte, ack AckMode) (res PublishResult, err error) {
	err = cc.publish(ctx, ack, func(c *Client) (err error) {
		res, err = c.PublishBatchAcked(ctx, namespace, stream, payloads, ack)
		return err
	})
	return res, err
}

// PublishKeyedAcked is Client.PublishKeyedAcked on the current connection.
func (cc *ClusterClient) PublishKeyedAcked(ctx context.Context, namespace, stream string, key, payload []byte, ack AckMode) (res PublishResult, err error) {
	err = cc.publish(ctx, ack, func(c *Client) (err error) {
		res, err = c.PublishKeyedAcked(ctx, namespace, stream, key, payload, ack)
		return err
	})
	return res, err
}

// Subscribe is Client.Subscribe on the current connection, returning a
// subscription that resumes by itself on a durable stream.
func (cc *ClusterClient) Subscribe(ctx context.Context, namespace, stream string) (*ClusterSubscription, error) {
	var sub *Subscription
	err := cc.do(ctx, always, func(c *Client) (err error) {
		sub, err = c.Subscribe(ctx, namespace, stream)
		return err
	})
	if err != nil {
		return nil, err
	}
	return newClusterSubscription(cc, sub, 0), nil
}

// SubscribeFrom is Client.SubscribeFrom on the current connection,
// returning a subscription that resumes by itself on a durable stream.
func (cc *ClusterClient) SubscribeFrom(ctx context.Context, namespace, stream string, o SubscribeOptions) (*ClusterSubscription, error) {
	var sub *Subscription
	err := cc.do(ctx, always, func(c *Client) (err error) {
		sub, err = c.SubscribeFrom(ctx, namespace, stream, o)
		return err
	})
	if err != nil {
		return nil, err
	}
	return newClusterSubscription(cc, sub, o.Shard), nil
}

// Read is Client.Read on the current connection; reading changes
// nothing, so it is retried after a reconnect.
func (cc *ClusterClient) Read(ctx context.Context, namespace, stream string, shard uint32, from uint64, end *uint64, maxRecords int) (page *ReadPage, err error) {
	err = cc.do(ctx, always, func(c *Client) (err error) {
		page, err = c.Read(ctx, namespace, stream, shard, from, end, maxRecords)
		return err
	})
	return page, err
}

// OffsetForTime is Client.OffsetForTime on the current connection,
// retried after a reconnect.
func (cc *ClusterClient) OffsetForTime(ctx context.Context, namespace, stream string, shard uint32, t time.Time) (offset uint64, ok bool, err error) {
	err = cc.do(ctx, always, func(c *Client) (err error) {
		offset, ok, err = c.OffsetForTime(ctx, namespace, stream, shard, t)
		return err
	})
	return offset, ok, err
}

// SupportsRead is Client.SupportsRead for the last broker connected.
func (cc *ClusterClient) SupportsRead() bool {
	return cc.features.Load()&wire.FeatureStreamRead != 0
}

// SupportsOffsetForTime is Client.SupportsOffsetForTime for the last
// broker connected.
func (cc *ClusterClient) SupportsOffsetForTime() bool {
	return cc.features.Load()&wire.FeatureRecordTimestamps != 0
}

// CachePut is Client.CachePut; a put is retried after a reconnect, since
// writing the same value twice leaves the same state.
func (cc *ClusterClient) CachePut(ctx context.Context, namespace, cache, key string, value []byte, ttl time.Duration) error {
	return cc.do(ctx, always, func(c *Client) error { return c.CachePut(ctx, namespace, cache, key, value, ttl) })
}

// CacheGet is Client.CacheGet on the current connection.
func (cc *ClusterClient) CacheGet(ctx context.Context, namespace, cache, key string) (value []byte, found bool, err error) {
	err = cc.do(ctx, always, func(c *Client) (err error) {
		value, found, err = c.CacheGet(ctx, namespace, cache, key)
		return err
	})
	return value, found, err
}

// CacheDelete is Client.CacheDelete; it is retried only when the first
// attempt never left the client, since a repeat would report the key gone.
func (cc *ClusterClient) CacheDelete(ctx context.Context, namespace, cache, key string) (value []byte, found bool, err error) {
	err = cc.do(ctx, wasNotSent, func(c *Client) (err error) {
		value, found, err = c.CacheDelete(ctx, namespace, cache, key)
		return err
	})
	return value, found, err
}

// Finish flushes fire-and-forget publishes on the current connection. It
// does not reconnect. Frames queued on a connection that died are reported
// as failures while that connection is current; once a later call has
// replaced it, they are lost without a report.
func (cc *ClusterClient) Finish(ctx context.Context) error {
	cc.mu.Lock()
	c, closed := cc.cur, cc.closed
	cc.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case c == nil:
		return nil
	}
	return c.Finish(ctx)
}

// Close closes the current connection; later calls return ErrClosed.
func (cc *ClusterClient) Close() error {
	cc.mu.Lock()
	c := cc.cur
	cc.cur, cc.closed = nil, true
	cc.mu.Unlock()
	if c != nil {
		return c.Close()
	}
	return nil
}

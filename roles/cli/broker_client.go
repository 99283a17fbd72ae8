package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// brokerClient is the part of *felix.Client the commands use.
type brokerClient interface {
	PublishAcked(ctx context.Context, namespace, stream string, payload []byte, ack felix.AckMode) (felix.PublishResult, error)
	PublishKeyedAcked(ctx context.Context, namespace, stream string, key, payload []byte, ack felix.AckMode) (felix.PublishResult, error)
	PublishIf(ctx context.Context, namespace, stream string, key []byte, payloads [][]byte, expected uint64) (uint64, error)
	SubscribeFrom(ctx context.Context, namespace, stream string, o felix.SubscribeOptions) (eventSource, error)
	CachePut(ctx context.Context, namespace, cache, key string, value []byte, ttl time.Duration) error
	CacheGet(ctx context.Context, namespace, cache, key string) ([]byte, bool, error)
	CacheDelete(ctx context.Context, namespace, cache, key string) ([]byte, bool, error)
	CachePutIf(ctx context.Context, namespace, cache, key string, value []byte, ttl time.Duration, cond felix.CacheCondition) (felix.CondResult, error)
	CacheDeleteIf(ctx context.Context, namespace, cache, key string, version uint64) (felix.CondResult, error)
	CacheGetVersioned(ctx context.Context, namespace, cache, key string) ([]byte, uint64, bool, error)
	CounterAdd(ctx context.Context, namespace, cache, key string, delta int64) (int64, error)
	CounterGet(ctx context.Context, namespace, cache, key string) (int64, bool, error)
	WatchCache(ctx context.Context, namespace, cache string, f felix.CacheWatchFilter, opts ...felix.WatchOption) (cacheWatcher, error)
	Read(ctx context.Context, namespace, stream string, shard uint32, from uint64, end *uint64, maxRecords int) (*felix.ReadPage, error)
	OffsetForTime(ctx context.Context, namespace, stream string, shard uint32, t time.Time) (uint64, bool, error)
	Finish(ctx context.Context) error
	Close() error
}

// eventSource is the part of *felix.Subscription the commands use.
type eventSource interface {
	Next(ctx context.Context) (felix.Event, error)
	StartOffset() (uint64, bool)
	LiveOffset() (uint64, bool)
	Close() error
}

type connectFunc func(ctx context.Context, s Settings) (brokerClient, error)

// sdkClient adapts *felix.Client to brokerClient.
type sdkClient struct{ *felix.Client }

func (c sdkClient) SubscribeFrom(ctx context.Context, namespace, stream string, o felix.SubscribeOptions) (eventSource, error) {
	sub, err := c.Client.SubscribeFrom(ctx, namespace, stream, o)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// dialBroker connects the Go client with the settings' broker, CA and
// token; with several brokers (a cluster's client.json), a ClusterClient
// seeded with all of them (clusterClient).
func dialBroker(ctx context.Context, s Settings) (brokerClient, error) {
	if len(s.MoreBrokers) > 0 {
		return dialCluster(ctx, s)
	}
	c, err := dialFirst(ctx, s)
	if err != nil {
		return nil, err
	}
	return patientClient{sdkClient{c}}, nil
}

// dialFirst connects to the settings' broker or, when it cannot be
// reached, to the first of s.MoreBrokers that can, each tried within
// --connect-timeout; the first error is the one reported.
func dialFirst(ctx context.Context, s Settings) (*felix.Client, error) {
	cfg, err := s.SDKConfig()
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, addr := range append([]string{s.Broker}, s.MoreBrokers...) {
		cfg.Addr = addr
		dctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout) // --connect-timeout
		c, err := felix.Connect(dctx, cfg)
		cancel()
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("connect to broker %s: %w", addr, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// clientSetup makes the printer and loads the client settings: the first
// steps of every command that talks to the broker or the admin API. A
// settings failure is rendered for the user.
func clientSetup(c *cli.Context) (printer, Settings, error) {
	p, err := newPrinter(c)
	if err != nil {
		return printer{}, Settings{}, err
	}
	s, err := LoadClientSettings(c)
	if err != nil {
		return printer{}, Settings{}, exitError(err)
	}
	return p, s, nil
}

// runBroker is clientSetup, then withBroker. fn's ctx is c.Context, which
// with interruptible SIGINT and SIGTERM also end.
func runBroker(c *cli.Context, tk toolkit, interruptible bool, fn func(ctx context.Context, bc brokerClient, s Settings, p printer) error) error {
	p, s, err := clientSetup(c)
	if err != nil {
		return err
	}
	ctx := c.Context
	if interruptible {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	return withBroker(ctx, tk, s, func(bc brokerClient) error { return fn(ctx, bc, s, p) })
}

// withBroker resolves the settings, connects, runs fn and closes the
// client, rendering any failure for the user.
func withBroker(ctx context.Context, tk toolkit, s Settings, fn func(brokerClient) error) error {
	bc, err := tk.connect(ctx, s)
	if err != nil {
		return exitError(err)
	}
	err = fn(bc)
	if cerr := bc.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return exitError(err)
}

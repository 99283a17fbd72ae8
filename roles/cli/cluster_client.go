package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// clusterClient adapts *felix.ClusterClient to brokerClient, for a
// client.json that names several brokers (a cluster's, as felix dev
// writes): requests go where the ClusterClient sends them, so a command
// reaches each shard wherever it is served. The few commands that need
// one broker's own connection (sdkClientOf: stream info, cache keys) get
// one, dialled on first use, to the first broker that answers.
type clusterClient struct {
	*felix.ClusterClient
	s Settings

	mu  sync.Mutex    // guards one
	one *felix.Client // nil until asked for
}

// dialCluster connects a ClusterClient seeded with every broker of s.
func dialCluster(ctx context.Context, s Settings) (brokerClient, error) {
	cfg, err := s.SDKConfig()
	if err != nil {
		return nil, err
	}
	seeds := append([]string{s.Broker}, s.MoreBrokers...)
	dctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout*time.Duration(len(seeds))) // --connect-timeout per broker
	defer cancel()
	cc, err := felix.ConnectCluster(dctx, seeds, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster's brokers %v: %w", seeds, err)
	}
	return patientClient{&clusterClient{ClusterClient: cc, s: s}}, nil
}

func (c *clusterClient) SubscribeFrom(ctx context.Context, namespace, stream string, o felix.SubscribeOptions) (eventSource, error) {
	sub, err := c.ClusterClient.SubscribeFrom(ctx, namespace, stream, o)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

func (c *clusterClient) WatchCache(ctx context.Context, namespace, cache string, f felix.CacheWatchFilter, opts ...felix.WatchOption) (cacheWatcher, error) {
	w, err := c.ClusterClient.WatchCache(ctx, namespace, cache, f, opts...)
	if err != nil {
		return nil, err
	}
	return clusterWatch{w}, nil
}

// clusterWatch is a ClusterCacheWatch as a cacheWatcher. A cluster watch
// that had to start over from current values delivers them itself, so
// there is no resnapshot for the command to announce.
type clusterWatch struct{ *felix.ClusterCacheWatch }

func (clusterWatch) Resnapshot() bool { return false }

// single returns a connection to one broker of the cluster, dialled on
// first use.
func (c *clusterClient) single(ctx context.Context) (*felix.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.one != nil {
		return c.one, nil
	}
	one, err := dialFirst(ctx, c.s)
	if err != nil {
		return nil, err
	}
	c.one = one
	return one, nil
}

func (c *clusterClient) Close() error {
	err := c.ClusterClient.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.one != nil {
		if cerr := c.one.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdWatchFanout is the watch-fanout peer on etcd: conns clientv3
// clients, each holding its share of the watchers of one key, and one
// writer client putting the key at rate for d.
func etcdWatchFanout(ctx context.Context, ec *etcdCluster, watchers, conns, rate int, d time.Duration) (figures, error) {
	newClient := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: ec.endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	}
	t := newWatchTracker(watchers, rate, d)
	key := fmt.Sprintf("/bench/watch/%d", time.Now().UnixNano())
	var clients []*clientv3.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	var readers sync.WaitGroup
	defer readers.Wait() // runs after stop: the watch channels close
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for range max(1, min(conns, watchers)) {
		c, err := newClient()
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	err := openSpread(len(clients), watchers, func(ci, i int) error {
		ch := clients[ci].Watch(wctx, key, clientv3.WithCreatedNotify())
		select {
		case resp, ok := <-ch:
			if !ok || !resp.Created {
				return fmt.Errorf("etcd watcher %d: not created: %v", i, resp.Err())
			}
		case <-time.After(30 * time.Second):
			return fmt.Errorf("etcd watcher %d: not created in 30s", i)
		}
		seen := t.watcher()
		readers.Add(1)
		go func() {
			defer readers.Done()
			for resp := range ch {
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypePut {
						seen(ev.Kv.Value)
					}
				}
			}
		}()
		return nil
	})
	if err != nil {
		return nil, err
	}
	writer, err := newClient()
	if err != nil {
		return nil, err
	}
	clients = append(clients, writer)
	put := func(ctx context.Context, v []byte) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := writer.Put(pctx, key, string(v))
		return err
	}
	if err := t.warmUp(ctx, put); err != nil {
		return nil, err
	}
	return t.write(ctx, rate, put)
}

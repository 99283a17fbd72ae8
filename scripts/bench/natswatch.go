package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsWatchFanout is the watch-fanout peer on NATS: a KV bucket (memory
// storage, its default history of 1), conns connections each holding its
// share of the KV watchers of one key, and one writer connection putting
// the key at rate for d.
func natsWatchFanout(ctx context.Context, n *natsNode, watchers, conns, rate int, d time.Duration) (figures, error) {
	t := newWatchTracker(watchers, rate, d)
	var ncs []*nats.Conn
	defer func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}()
	connect := func(name string) (jetstream.JetStream, error) {
		nc, err := n.connect(name)
		if err != nil {
			return nil, err
		}
		ncs = append(ncs, nc)
		return jetstream.New(nc)
	}
	js, err := connect("bench-watch-writer")
	if err != nil {
		return nil, err
	}
	bucket := fmt.Sprintf("benchwatch%d", time.Now().UnixNano())
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		return nil, err
	}
	defer js.DeleteKeyValue(context.WithoutCancel(ctx), bucket)
	var kvs []jetstream.KeyValue
	for i := range max(1, min(conns, watchers)) {
		wjs, err := connect(fmt.Sprintf("bench-watch-%d", i))
		if err != nil {
			return nil, err
		}
		wkv, err := wjs.KeyValue(ctx, bucket)
		if err != nil {
			return nil, err
		}
		kvs = append(kvs, wkv)
	}
	wctx, stop := context.WithCancel(ctx)
	var readers sync.WaitGroup
	defer readers.Wait()
	defer stop()
	var mu sync.Mutex
	var kws []jetstream.KeyWatcher
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range kws {
			w.Stop()
		}
	}()
	err = openSpread(len(kvs), watchers, func(ci, i int) error {
		w, err := kvs[ci].Watch(wctx, "k", jetstream.UpdatesOnly())
		if err != nil {
			return fmt.Errorf("nats watcher %d: %w", i, err)
		}
		mu.Lock()
		kws = append(kws, w)
		mu.Unlock()
		seen := t.watcher()
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case e, ok := <-w.Updates():
					if !ok {
						return
					}
					if e != nil && e.Operation() == jetstream.KeyValuePut {
						seen(e.Value())
					}
				case <-wctx.Done():
					return
				}
			}
		}()
		return nil
	})
	if err != nil {
		return nil, err
	}
	put := func(ctx context.Context, v []byte) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := kv.Put(pctx, "k", v)
		return err
	}
	if err := t.warmUp(ctx, put); err != nil {
		return nil, err
	}
	return t.write(ctx, rate, put)
}

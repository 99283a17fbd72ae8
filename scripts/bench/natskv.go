package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The cache workloads' NATS peer: a JetStream KV bucket on file storage
// (its default history of 1, bounded to 1 GiB), written by kv.Put and
// kv.Update from one connection. Whether each write is fsynced is the
// server's sync_interval (natsConfig.syncAlways).

// natsKV creates a fresh file-storage bucket and returns it with a func
// that deletes it and closes the connection.
func natsKV(ctx context.Context, n *natsNode, name string) (jetstream.KeyValue, func(), error) {
	nc, err := n.connect(name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	bucket := fmt.Sprintf("benchcache%d", time.Now().UnixNano())
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.FileStorage, MaxBytes: 1 << 30})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return kv, func() {
		js.DeleteKeyValue(context.WithoutCancel(ctx), bucket)
		nc.Close()
	}, nil
}

func natsKVPut(kv jetstream.KeyValue) kvPut {
	return func(ctx context.Context, key string, v []byte) error {
		_, err := kv.Put(ctx, key, v)
		return err
	}
}

// natsKVPuts is acked puts with inflight callers.
func natsKVPuts(ctx context.Context, n *natsNode, inflight, keys, value int, d time.Duration) (figures, error) {
	kv, done, err := natsKV(ctx, n, "bench-kv-puts")
	if err != nil {
		return nil, err
	}
	defer done()
	return putLoad(ctx, inflight, keys, value, d, natsKVPut(kv))
}

// natsKVLatency is one put at a time.
func natsKVLatency(ctx context.Context, n *natsNode, keys, value int, d time.Duration) (figures, error) {
	kv, done, err := natsKV(ctx, n, "bench-kv-latency")
	if err != nil {
		return nil, err
	}
	defer done()
	return putLatency(ctx, keys, value, d, natsKVPut(kv))
}

// natsKVCAS is compare-and-set on one key: kv.Get, then kv.Update with
// the revision read.
func natsKVCAS(ctx context.Context, n *natsNode, callers, value int, d time.Duration) (figures, error) {
	kv, done, err := natsKV(ctx, n, "bench-kv-cas")
	if err != nil {
		return nil, err
	}
	defer done()
	if _, err := kv.Put(ctx, "cas", make([]byte, value)); err != nil {
		return nil, err
	}
	return casLoad(ctx, callers, d, kvCAS{
		read: func(ctx context.Context) ([]byte, uint64, error) {
			e, err := kv.Get(ctx, "cas")
			if err != nil {
				return nil, 0, err
			}
			return e.Value(), e.Revision(), nil
		},
		write: func(ctx context.Context, v []byte, rev uint64) (bool, error) {
			_, err := kv.Update(ctx, "cas", v, rev)
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				return false, nil
			}
			return err == nil, err
		},
	})
}

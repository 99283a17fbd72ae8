package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The cache workloads' etcd peer: puts, and compare-and-set as a Get and a
// Txn If(ModRevision == r) Then(Put), from one client. etcd fsyncs its WAL
// before it acknowledges a write.

// etcdClient returns a client of ec and a fresh key prefix.
func etcdClient(ec *etcdCluster) (*clientv3.Client, string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, "", err
	}
	return cli, fmt.Sprintf("/bench/cache/%d/", time.Now().UnixNano()), nil
}

func etcdPut(cli *clientv3.Client, prefix string) kvPut {
	return func(ctx context.Context, key string, v []byte) error {
		_, err := cli.Put(ctx, prefix+key, string(v))
		return err
	}
}

// etcdCachePuts is acked puts with inflight callers.
func etcdCachePuts(ctx context.Context, ec *etcdCluster, inflight, keys, value int, d time.Duration) (figures, error) {
	cli, prefix, err := etcdClient(ec)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return putLoad(ctx, inflight, keys, value, d, etcdPut(cli, prefix))
}

// etcdCacheLatency is one put at a time.
func etcdCacheLatency(ctx context.Context, ec *etcdCluster, keys, value int, d time.Duration) (figures, error) {
	cli, prefix, err := etcdClient(ec)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return putLatency(ctx, keys, value, d, etcdPut(cli, prefix))
}

// etcdCAS is compare-and-set on one key.
func etcdCAS(ctx context.Context, ec *etcdCluster, callers, value int, d time.Duration) (figures, error) {
	cli, prefix, err := etcdClient(ec)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	key := prefix + "cas"
	if _, err := cli.Put(ctx, key, string(make([]byte, value))); err != nil {
		return nil, err
	}
	return casLoad(ctx, callers, d, kvCAS{
		read: func(ctx context.Context) ([]byte, uint64, error) {
			resp, err := cli.Get(ctx, key)
			if err != nil {
				return nil, 0, err
			}
			if len(resp.Kvs) == 0 {
				return nil, 0, errors.New("etcd: the cas key is gone")
			}
			return resp.Kvs[0].Value, uint64(resp.Kvs[0].ModRevision), nil
		},
		write: func(ctx context.Context, v []byte, rev uint64) (bool, error) {
			resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", int64(rev))).
				Then(clientv3.OpPut(key, string(v))).Commit()
			if err != nil {
				return false, err
			}
			return resp.Succeeded, nil
		},
	})
}

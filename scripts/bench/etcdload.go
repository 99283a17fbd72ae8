package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdPuts writes uniquely keyed ~200 B JSON values with concurrency
// callers for d: the peer of Felix's control-plane creates.
func etcdPuts(ctx context.Context, ec *etcdCluster, concurrency int, d time.Duration) (figures, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	value := `{"tenant_id":"default","namespace":"default","stream":"bench-meta-0000000000","shards":1,` +
		`"durable":false,"retention":{},"sub_queue_policy":"block","consistency":"leader","replication_factor":1}`
	value += strings.Repeat(" ", max(0, 200-len(value)))
	prefix := fmt.Sprintf("/bench/%d/", time.Now().UnixNano())
	rec := newRecorder(200000)
	var seq, ok, failed atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range max(1, concurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				key := fmt.Sprintf("%s%d", prefix, seq.Add(1))
				t0 := time.Now()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := cli.Put(cctx, key, value)
				cancel()
				if err != nil {
					if failed.Add(1) == 1 {
						firstErr.Store(err)
					}
					continue
				}
				rec.add(time.Since(t0))
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	q := rec.quantilesMS(0.5, 0.99, 0.999)
	if q == nil {
		if err, isErr := firstErr.Load().(error); isErr {
			return nil, err
		}
		return nil, errors.New("etcd: no put completed")
	}
	return figures{"creates_per_s": float64(ok.Load()) / elapsed.Seconds(), "p50_ms": q[0], "p99_ms": q[1], "errors": float64(failed.Load())}, ctx.Err()
}

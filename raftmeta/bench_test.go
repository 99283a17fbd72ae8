package raftmeta

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkPropose3 measures proposals per second through a three-member
// group with 64 concurrent proposers spread over the members (followers
// forward to the leader), each command about 200 bytes.
func BenchmarkPropose3(b *testing.B) {
	c := newTestCluster(b, 3, 0)
	c.leader()
	value := bytes.Repeat([]byte("v"), 190)
	const proposers = 64
	var next atomic.Int64
	var failed atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := c.nodes[uint64(p%3)+1]
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := n.Propose(context.Background(), KVPut([]byte(fmt.Sprintf("k%08d", i)), value)); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d proposals failed", f)
	}
}

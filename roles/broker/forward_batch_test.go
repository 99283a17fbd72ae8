package broker

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

// BenchmarkForwardedCachePut compares cache puts served by the broker
// the client reached (local) with the same through the other broker
// (forwarded), with 64 requests in flight on one client stream, as a
// pipelining SDK keeps them.
func BenchmarkForwardedCachePut(b *testing.B) {
	a, o := startStandard(b)
	key := cacheKeys()[1] // on o
	value := make([]byte, 100)
	const inFlight = 64
	for _, tc := range []struct {
		name string
		via  *env
	}{{"local", o}, {"forwarded", a}} {
		s := tc.via.authed(tc.via.dial(0), 0, allFeatures, cacheAll)
		b.Run(tc.name+"/inflight64", func(b *testing.B) {
			id, out := uint64(0), 0
			put := func() {
				id++
				out++
				s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Value: value, RequestID: id})
			}
			recv := func() {
				if _, ok := s.recv().(*wire.CacheOK); !ok {
					b.Fatal("refused")
				}
				out--
			}
			for b.Loop() {
				if out == inFlight {
					recv()
				}
				put()
			}
			for out > 0 {
				recv()
			}
		})
	}
}

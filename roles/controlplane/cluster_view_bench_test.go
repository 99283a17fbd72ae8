package controlplane

import (
	"fmt"
	"testing"

	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// BenchmarkClusterView measures a broker's poll at 10,000 shards over
// three brokers: unchanged (the common case, answered from the brokers
// and the revision alone) and changed (the whole view, read once and
// shared; each iteration changes the placement so it is read again).
func BenchmarkClusterView(b *testing.B) {
	store := openTestRaft(b, b.TempDir())
	svc, err := New(Config{Logger: quietLogger()}, store)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	for _, n := range []string{"b1", "b2", "b3"} {
		if _, err := svc.RegisterBroker(bg, testRegistration(n, "sid-"+n)); err != nil {
			b.Fatal(err)
		}
	}
	const shards = 10_000
	ch := catalog.PlacementChange{LastGeneration: shards}
	for i := range shards {
		ch.Put = append(ch.Put, wire.ShardAssignment{Kind: wire.PlacementStream, TenantID: "t", Namespace: "ns",
			Name: fmt.Sprintf("s%03d", i/100), Shard: uint32(i % 100), Incarnation: "inc", NodeID: fmt.Sprintf("b%d", 1+i%3),
			StorageID: "sid", Generation: uint64(i + 1), Consistency: "leader"})
	}
	if err := store.ApplyPlacement(bg, ch); err != nil {
		b.Fatal(err)
	}
	v, _, err := svc.ClusterView(bg, "")
	if err != nil || len(v.Assignments) != shards {
		b.Fatalf("%d assignments, %v", len(v.Assignments), err)
	}
	b.Run("unchanged", func(b *testing.B) {
		for b.Loop() {
			if _, changed, err := svc.ClusterView(bg, v.Tag); err != nil || changed {
				b.Fatal(changed, err)
			}
		}
	})
	b.Run("changed", func(b *testing.B) {
		rev := uint64(1)
		for b.Loop() {
			b.StopTimer()
			err := store.ApplyPlacement(bg, catalog.PlacementChange{ExpectRevision: rev, ExpectLastGeneration: shards, LastGeneration: shards})
			rev++
			b.StartTimer()
			if err != nil {
				b.Fatal(err)
			}
			if _, changed, err := svc.ClusterView(bg, v.Tag); err != nil || !changed {
				b.Fatal(changed, err)
			}
		}
	})
}

package placement

import (
	"fmt"
	"testing"
)

// benchCluster is 100 brokers over three zones and 1,000 streams of ten
// shards each (10,000 shards), half of them durable.
func benchCluster() ([]Broker, []Resource) {
	brokers := make([]Broker, 100)
	for i := range brokers {
		brokers[i] = live(fmt.Sprintf("n%03d", i), string(rune('a'+i%3)), fmt.Sprintf("s%03d", i))
	}
	res := make([]Resource, 1000)
	for i := range res {
		res[i] = stream(fmt.Sprintf("s%04d", i), 10, i%2 == 0)
	}
	return brokers, res
}

// BenchmarkPlaceTenThousandShards places 10,000 new shards on 100
// brokers: the first pass after a bulk create. The time per pass is
// recorded in docs/placement.md, never asserted.
func BenchmarkPlaceTenThousandShards(b *testing.B) {
	brokers, res := benchCluster()
	in := Input{Brokers: brokers, Resources: res}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSteadyPassTenThousandShards is the reconcile loop's common
// case: 10,000 placed shards, nothing to change.
func BenchmarkSteadyPassTenThousandShards(b *testing.B) {
	brokers, res := benchCluster()
	first, err := Compute(Input{Brokers: brokers, Resources: res})
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Brokers: brokers, Resources: res, Current: first.Next}
	b.ReportAllocs()
	for b.Loop() {
		if out, err := Compute(in); err != nil || len(out.Decisions) != 0 {
			b.Fatalf("err %v, %d decisions", err, len(out.Decisions))
		}
	}
}

// BenchmarkOneBrokerDownTenThousandShards: one of 100 brokers goes down;
// its in-memory shards move and its durable ones wait.
func BenchmarkOneBrokerDownTenThousandShards(b *testing.B) {
	brokers, res := benchCluster()
	first, err := Compute(Input{Brokers: brokers, Resources: res})
	if err != nil {
		b.Fatal(err)
	}
	brokers[7].State = Down
	in := Input{Brokers: brokers, Resources: res, Current: first.Next}
	b.ReportAllocs()
	for b.Loop() {
		if out, err := Compute(in); err != nil || len(out.Decisions) == 0 {
			b.Fatalf("err %v, %d decisions", err, len(out.Decisions))
		}
	}
}

// BenchmarkPlaceReplicatedTenThousandShards is the first pass of
// benchCluster with every durable stream at replication factor 3: 10,000
// owners and 10,000 followers.
func BenchmarkPlaceReplicatedTenThousandShards(b *testing.B) {
	brokers, res := benchCluster()
	for i := range res {
		if res[i].Durable {
			res[i].ReplicationFactor = 3
		}
	}
	in := Input{Brokers: brokers, Resources: res}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(in); err != nil {
			b.Fatal(err)
		}
	}
}

package placement_test

import (
	"fmt"

	"github.com/felixmq/felix/roles/controlplane/placement"
	"github.com/felixmq/felix/wire"
)

// A three-broker cluster places a durable stream of three shards, then
// one broker goes down: its shard waits for it rather than being served
// empty elsewhere.
func ExampleCompute() {
	brokers := []placement.Broker{
		{NodeID: "n1", State: placement.Live, StorageID: "disk-1"},
		{NodeID: "n2", State: placement.Live, StorageID: "disk-2"},
		{NodeID: "n3", State: placement.Live, StorageID: "disk-3"},
	}
	orders := placement.StreamResource(wire.StreamSpec{
		TenantID: "acme", Namespace: "shop", Stream: "orders", Shards: 3, Durable: true, Incarnation: "1",
	})
	in := placement.Input{Brokers: brokers, Resources: []placement.Resource{orders}}
	first, err := placement.Compute(in)
	if err != nil {
		panic(err)
	}
	for _, a := range first.Next.Assignments {
		fmt.Printf("shard %d: %s at generation %d\n", a.Shard.Shard, a.Owner, a.Generation)
	}

	down := first.Next.Assignments[1].Owner
	for i := range brokers {
		if brokers[i].NodeID == down {
			brokers[i].State = placement.Down
		}
	}
	in.Current = first.Next
	second, err := placement.Compute(in)
	if err != nil {
		panic(err)
	}
	for _, d := range second.Decisions {
		fmt.Printf("%s shard %d on %s: %s\n", d.Kind, d.Shard.Shard, d.To, d.Reason)
	}
	// Output:
	// shard 0: n3 at generation 1
	// shard 1: n2 at generation 2
	// shard 2: n1 at generation 3
	// waiting shard 1 on n2: owner_down
}

package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/felixmq/felix/wire"
)

func TestPrintPlacement(t *testing.T) {
	v := wire.PlacementView{Kind: wire.PlacementStream, TenantID: "default", Namespace: "default", Name: "s", LastGeneration: 7,
		Shards: []wire.ShardAssignment{
			{Shard: 0, NodeID: "broker-1", Generation: 3, Replicas: []wire.ShardReplica{{NodeID: "broker-2", StorageID: "s2"}, {NodeID: "broker-3", StorageID: "s3"}}},
			{Shard: 1, NodeID: "broker-2", Generation: 7, Unavailable: wire.UnavailableOwnerDown},
			{Shard: 2, Unavailable: wire.UnavailableNotAssigned},
		}}
	var out bytes.Buffer
	if err := printPlacement(printer{w: &out}, placementShow{PlacementView: v}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(out.String()), " ")
	if got != "SHARD OWNER FOLLOWERS GENERATION STATE END DURABLE LAG 0 broker-1 broker-2,broker-3 3 serving - -,- -,- "+
		"1 broker-2 - 7 owner_down - - - 2 - - - not_assigned - - -" {
		t.Fatalf("table: %s", got)
	}
	// With the brokers' reports: the leader's end, each follower's
	// durable offset and lag; a report of another generation is not shown.
	lag := uint64(4)
	rep := wire.ShardReplication{Kind: wire.PlacementStream, Shard: 0, Generation: 3, Leader: "broker-1",
		LeaderPosition: &wire.CopyPosition{Generation: 3, Durable: 118, End: 120},
		Replicas: []wire.ReplicaState{{NodeID: "broker-2", Position: &wire.CopyPosition{Generation: 3, Durable: 116}, Lag: &lag},
			{NodeID: "broker-3", Position: &wire.CopyPosition{Generation: 2, Durable: 90}}}}
	out.Reset()
	if err := printPlacement(printer{w: &out}, placementShow{PlacementView: v, Replication: []wire.ShardReplication{rep}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(strings.Split(out.String(), "\n")[1]); strings.Join(got[5:], " ") != "120 116,- 4,-" {
		t.Fatalf("shard 0 with reports: %q", got)
	}
	out.Reset()
	if err := printPlacement(printer{w: &out, json: true}, placementShow{PlacementView: v, Replication: []wire.ShardReplication{rep}}); err != nil {
		t.Fatal(err)
	}
	var back placementShow
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Shards) != 3 || back.Shards[1].Unavailable != "owner_down" || back.LastGeneration != 7 ||
		len(back.Shards[0].Replicas) != 2 || back.Shards[0].Replicas[1].StorageID != "s3" || len(back.Replication) != 1 ||
		*back.Replication[0].Replicas[0].Lag != 4 {
		t.Fatalf("json %s: %v", out.Bytes(), err)
	}
}

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
			{Shard: 0, NodeID: "broker-1", Generation: 3},
			{Shard: 1, NodeID: "broker-2", Generation: 7, Unavailable: wire.UnavailableOwnerDown},
			{Shard: 2, Unavailable: wire.UnavailableNotAssigned},
		}}
	var out bytes.Buffer
	if err := printPlacement(printer{w: &out}, v); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(out.String()), " ")
	if got != "SHARD OWNER GENERATION STATE 0 broker-1 3 serving 1 broker-2 7 owner_down 2 - - not_assigned" {
		t.Fatalf("table: %s", got)
	}
	out.Reset()
	if err := printPlacement(printer{w: &out, json: true}, v); err != nil {
		t.Fatal(err)
	}
	var back wire.PlacementView
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Shards) != 3 || back.Shards[1].Unavailable != "owner_down" || back.LastGeneration != 7 {
		t.Fatalf("json %s: %v", out.Bytes(), err)
	}
}

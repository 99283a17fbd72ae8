package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestPrintBrokersAndFeatures(t *testing.T) {
	now := time.UnixMilli(1_800_000_003_000)
	var out bytes.Buffer
	brokers := []wire.Broker{
		{BrokerRegistration: wire.BrokerRegistration{NodeID: "broker-1", ClientAddrs: []string{"10.0.0.1:5000"}, Zone: "a"},
			State: wire.BrokerLive, LastHeartbeatMs: 1_800_000_000_000},
		{BrokerRegistration: wire.BrokerRegistration{NodeID: "broker-2", ClientAddrs: []string{"10.0.0.2:5000"}}, State: wire.BrokerDown, ShardsOwned: 3},
	}
	if err := printBrokers(printer{w: &out}, brokers, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NODE") ||
		strings.Join(strings.Fields(lines[1]), " ") != "broker-1 10.0.0.1:5000 a live 0 2027-01-15T08:00:00Z (3s ago)" ||
		strings.Join(strings.Fields(lines[2]), " ") != "broker-2 10.0.0.2:5000 - down 3 -" {
		t.Fatalf("table:\n%s", out.String())
	}
	out.Reset()
	v := wire.FleetFeaturesView{Features: []wire.FleetFeature{{Name: "majority_ack", Missing: []string{"broker-2"}}, {Name: "jump_hash_routing", Supported: true, Finalized: true}}}
	if err := printFeatures(printer{w: &out}, v); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(out.String()), " "); got != "FEATURE SUPPORTED FINALIZED MISSING majority_ack no no broker-2 jump_hash_routing yes yes -" {
		t.Fatalf("features: %s", got)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// brokersOf runs `felix admin brokers list -o json` against n.
func brokersOf(ctx context.Context, t *testing.T, n *node) map[string]wire.Broker {
	t.Helper()
	var list []wire.Broker
	if err := json.Unmarshal([]byte(n.mustFelix(ctx, "admin", "brokers", "list", "-o", "json")), &list); err != nil {
		t.Fatalf("brokers list: %v", err)
	}
	out := map[string]wire.Broker{}
	for _, b := range list {
		out[b.NodeID] = b
	}
	return out
}

func featuresOf(ctx context.Context, t *testing.T, n *node, args ...string) map[string]wire.FleetFeature {
	t.Helper()
	var v wire.FleetFeaturesView
	if err := json.Unmarshal([]byte(n.mustFelix(ctx, append([]string{"admin", "features"}, append(args, "-o", "json")...)...)), &v); err != nil {
		t.Fatalf("features: %v", err)
	}
	out := map[string]wire.FleetFeature{}
	for _, f := range v.Features {
		out[f.Name] = f
	}
	return out
}

// startBroker runs `felix broker` against n's control plane in its own
// data directory; the caller stops it.
func startBroker(t *testing.T, n *node, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(felixBin, "broker", "--data-dir", t.TempDir(), "--broker-addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--controlplane-url", n.client.ControlPlaneURL,
		"--token-file", n.dataFile("admin.token"))
	cmd.Env = append(cmd.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &syncBuffer{}, &syncBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// felix serve registers its broker; a new cluster finalizes what it
// reports; a second broker under the same node id is refused; a broker
// that stops heartbeating is marked down, and registers again when it
// comes back.
func TestBrokerRegistryAndFleetFeatures(t *testing.T) {
	n := startServe(t, "FELIX_NODE_ZONE=zone-e2e", "FELIX_NODE_HEARTBEAT_INTERVAL_MS=100", "FELIX_NODE_EXPIRY_TIMEOUT_MS=3000",
		"FELIX_NODE_REGRANT_MARGIN_MS=0", "FELIX_NODE_EXPIRY_SWEEP_INTERVAL_MS=100")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	brokers := brokersOf(ctx, t, n)
	self, ok := brokers["broker-1"]
	if len(brokers) != 1 || !ok || self.State != wire.BrokerLive || self.Zone != "zone-e2e" ||
		len(self.ClientAddrs) != 1 || self.ClientAddrs[0] != n.client.BrokerAddr {
		t.Fatalf("brokers %+v (broker at %s)", brokers, n.client.BrokerAddr)
	}
	table := n.mustFelix(ctx, "admin", "brokers", "list")
	if !strings.Contains(table, "broker-1") || !strings.Contains(table, "zone-e2e") || !strings.Contains(table, "live") {
		t.Fatalf("brokers table:\n%s", table)
	}

	features := featuresOf(ctx, t, n, "list")
	for _, name := range wire.FleetFeatures {
		f := features[name]
		reported := strings.Contains(","+strings.Join(self.Features, ",")+",", ","+name+",")
		if f.Supported != reported || f.Finalized != (reported && name != wire.FleetPublisherPrincipal) {
			t.Fatalf("feature %s: %+v (broker reports %v)", name, f, self.Features)
		}
	}
	if f := featuresOf(ctx, t, n, "finalize", wire.FleetPublisherPrincipal)[wire.FleetPublisherPrincipal]; !f.Finalized {
		t.Fatalf("after finalize: %+v", f)
	}
	// The broker learns the gate from its heartbeats' answers.
	eventually(t, time.Minute, "the broker's fleet feature metric", func() bool {
		return n.metric(`felix_broker_fleet_feature_enabled{feature="publisher_principal"}`) == 1 &&
			n.metric(`felix_broker_fleet_feature_enabled{feature="jump_hash_routing"}`) == 1 &&
			n.metric(`felix_broker_fleet_feature_enabled{feature="majority_ack"}`) == 0
	})
	if _, errOut, code := n.felix(ctx, "admin", "features", "finalize", wire.FleetMajorityAck); code == 0 || !strings.Contains(errOut, "broker-1") {
		t.Fatalf("finalize of an unsupported feature: exit %d, %s", code, errOut)
	}

	// A second broker claiming broker-1 is refused and exits, naming why.
	dup := startBroker(t, n, "FELIX_NODE_ID=broker-1")
	done := make(chan error, 1)
	go func() { done <- dup.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(dup.Stderr.(*syncBuffer).String(), "duplicate node id") {
			t.Fatalf("duplicate broker exited with %v:\n%s", err, dup.Stderr.(*syncBuffer).String())
		}
	case <-ctx.Done():
		dup.Process.Kill()
		t.Fatal("a broker with a duplicate node id kept running")
	}

	// Another broker joins, falls silent (SIGSTOP) and is marked down
	// by the leader; continued, it registers again.
	b2 := startBroker(t, n, "FELIX_NODE_ID=broker-2", "FELIX_NODE_ZONE=zone-b", "FELIX_NODE_HEARTBEAT_INTERVAL_MS=100")
	t.Cleanup(func() {
		if b2.ProcessState == nil { // still running
			b2.Process.Signal(syscall.SIGCONT)
			b2.Process.Signal(syscall.SIGTERM)
			b2.Wait()
		}
	})
	state := func() wire.BrokerState { return brokersOf(ctx, t, n)["broker-2"].State }
	eventually(t, time.Minute, "broker-2 live", func() bool { return state() == wire.BrokerLive })
	b2.Process.Signal(syscall.SIGSTOP)
	eventually(t, time.Minute, "broker-2 marked down", func() bool { return state() == wire.BrokerDown })
	if b := brokersOf(ctx, t, n)["broker-1"]; b.State != wire.BrokerLive {
		t.Fatalf("broker-1 while broker-2 was stopped: %+v", b)
	}
	b2.Process.Signal(syscall.SIGCONT)
	eventually(t, time.Minute, "broker-2 live again", func() bool { return state() == wire.BrokerLive })
	if b := brokersOf(ctx, t, n)["broker-2"]; b.Registrations != 2 || b.Zone != "zone-b" {
		t.Fatalf("broker-2 after its return: %+v", b)
	}

	// Stopped for good and deregistered by the operator.
	b2.Process.Signal(syscall.SIGTERM)
	b2.Wait()
	n.mustFelix(ctx, "admin", "brokers", "deregister", "broker-2", "--yes")
	if s := state(); s != wire.BrokerDeregistered {
		t.Fatalf("broker-2 after deregister: %s", s)
	}
	if _, errOut, code := n.felix(ctx, "admin", "brokers", "deregister", "ghost", "--yes"); code == 0 || !strings.Contains(errOut, "ghost") {
		t.Fatalf("deregister of an unknown broker: exit %d, %s", code, errOut)
	}
}

package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// fakeRegistry records calls on channels and answers with the errors
// queued in regErrs and hbErrs (nil once they run out).
type fakeRegistry struct {
	regC            chan wire.BrokerRegistration
	hbC             chan wire.BrokerHeartbeat
	mu              sync.Mutex
	regErrs, hbErrs []error
	finalized       []string // answered by heartbeats
	expiryMs        int64    // answered by registrations and heartbeats
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{regC: make(chan wire.BrokerRegistration, 64), hbC: make(chan wire.BrokerHeartbeat, 1024)}
}

func (f *fakeRegistry) next(errs *[]error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(*errs) == 0 {
		return nil
	}
	err := (*errs)[0]
	*errs = (*errs)[1:]
	return err
}

func (f *fakeRegistry) RegisterBroker(_ context.Context, reg wire.BrokerRegistration) (wire.Broker, error) {
	err := f.next(&f.regErrs)
	select {
	case f.regC <- reg:
	default:
	}
	return wire.Broker{BrokerRegistration: reg, State: wire.BrokerLive, ExpiryTimeoutMs: f.expiryMs}, err
}

func (f *fakeRegistry) HeartbeatBroker(_ context.Context, hb wire.BrokerHeartbeat) (wire.Broker, error) {
	err := f.next(&f.hbErrs)
	select {
	case f.hbC <- hb:
	default:
	}
	return wire.Broker{FinalizedFeatures: f.finalized, ExpiryTimeoutMs: f.expiryMs}, err
}

func receive[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// startRegistered starts a broker with storage under dir that registers
// with reg; it returns the server and the Start error.
func startRegistered(t *testing.T, dir string, reg Registry, onFatal func(error)) (*Server, error) {
	t.Helper()
	cfg := testConfig()
	cfg.Durable.StorageDir = dir
	cfg.Node = NodeConfig{ID: "broker-7", Zone: "eu-1a", Region: "eu", HeartbeatInterval: time.Millisecond}
	srv := newTestBroker(t, cfg, Deps{Registry: reg, OnFatal: onFatal})
	return srv, srv.Start(context.Background())
}

// newTestBroker makes a broker from cfg and deps, with a catalog that
// holds nothing, a test certificate and a silent logger; the test's
// cleanup shuts it down. The caller starts it.
func newTestBroker(t *testing.T, cfg Config, deps Deps) *Server {
	t.Helper()
	deps.Catalog = &fakeSource{}
	deps.TLS, _ = testTLS(t)
	deps.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv
}

func TestBrokerRegistersAndHeartbeats(t *testing.T) {
	dir := t.TempDir()
	reg := newFakeRegistry()
	srv, err := startRegistered(t, dir, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, reg.regC, "registration")
	if got.NodeID != "broker-7" || got.Zone != "eu-1a" || got.Region != "eu" || got.StorageID == "" ||
		len(got.ClientAddrs) != 1 || got.ClientAddrs[0] != srv.Addr().String() || len(got.Features) == 0 {
		t.Fatalf("registration %+v", got)
	}
	hb := receive(t, reg.hbC, "heartbeat")
	if hb.NodeID != "broker-7" || hb.StorageID != got.StorageID {
		t.Fatalf("heartbeat %+v", hb)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Shutdown waited for the heartbeat task: nothing comes after it.
	for len(reg.hbC) > 0 {
		<-reg.hbC
	}
	select {
	case <-reg.hbC:
		t.Fatal("a heartbeat after Shutdown")
	default:
	}

	// The same directory keeps its storage identity; a new one gets another.
	reg2 := newFakeRegistry()
	if _, err := startRegistered(t, dir, reg2, nil); err != nil {
		t.Fatal(err)
	}
	if again := receive(t, reg2.regC, "registration after restart"); again.StorageID != got.StorageID {
		t.Fatalf("storage id %s after a restart, want %s", again.StorageID, got.StorageID)
	}
	reg3 := newFakeRegistry()
	if _, err := startRegistered(t, t.TempDir(), reg3, nil); err != nil {
		t.Fatal(err)
	}
	if other := receive(t, reg3.regC, "registration on a new directory"); other.StorageID == got.StorageID {
		t.Fatal("a new data directory kept the old storage identity")
	}
}

// The gate a heartbeat's answer carries is what
// felix_broker_fleet_feature_enabled shows.
func TestBrokerFleetFeatureMetric(t *testing.T) {
	reg := newFakeRegistry()
	reg.finalized = []string{wire.FleetJumpHashRouting}
	srv, err := startRegistered(t, t.TempDir(), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, reg.hbC, "heartbeat")
	receive(t, reg.hbC, "a second heartbeat") // the first one's answer was learnt
	var out strings.Builder
	srv.WriteMetrics(&out)
	for _, want := range []string{`felix_broker_fleet_feature_enabled{feature="jump_hash_routing"} 1`, `felix_broker_fleet_feature_enabled{feature="majority_ack"} 0`} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("metrics lack %s:\n%s", want, out.String())
		}
	}
}

func TestBrokerRegistersAgainWhenAHeartbeatIsRefused(t *testing.T) {
	reg := newFakeRegistry()
	reg.hbErrs = []error{&wire.Error{Code: "conflict", Retry: wire.RetryFatal, Message: `broker "broker-7" was marked down`}}
	if _, err := startRegistered(t, t.TempDir(), reg, nil); err != nil {
		t.Fatal(err)
	}
	receive(t, reg.regC, "registration")
	receive(t, reg.hbC, "refused heartbeat")
	receive(t, reg.regC, "second registration")
	receive(t, reg.hbC, "heartbeat after registering again")
}

func TestBrokerRetriesAnUnreachableControlPlane(t *testing.T) {
	reg := newFakeRegistry()
	// A network error, then a control plane without a registry (an
	// earlier release answers not_found): both are retried.
	reg.regErrs = []error{errors.New("connection refused"), &wire.Error{Code: wire.CodeNotFound, Retry: wire.RetryFatal, Message: "no route"}}
	if _, err := startRegistered(t, t.TempDir(), reg, nil); err != nil {
		t.Fatalf("an unreachable control plane failed the start: %v", err)
	}
	for range 3 {
		receive(t, reg.regC, "registration attempt")
	}
	receive(t, reg.hbC, "heartbeat once registered")
}

func TestBrokerRefusedRegistration(t *testing.T) {
	dup := &wire.Error{Code: "conflict", Retry: wire.RetryFatal, Message: "duplicate node id: broker \"broker-7\" is live"}
	reg := newFakeRegistry()
	reg.regErrs = []error{dup}
	_, err := startRegistered(t, t.TempDir(), reg, nil)
	if err == nil || !strings.Contains(err.Error(), "duplicate node id") {
		t.Fatalf("start with a duplicate node id: %v", err)
	}
	// Refused later, when it registers again: the owner is told.
	reg = newFakeRegistry()
	reg.hbErrs = []error{&wire.Error{Code: wire.CodeNotFound, Retry: wire.RetryFatal, Message: "not registered"}}
	reg.regErrs = []error{nil, dup}
	fatal := make(chan error, 1)
	if _, err := startRegistered(t, t.TempDir(), reg, func(err error) { fatal <- err }); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, fatal, "fatal refusal"); !strings.Contains(err.Error(), "duplicate node id") {
		t.Fatalf("fatal error %v", err)
	}
}

// TestTCPAdvertised: a TCP listener on the client address's port is not
// registered apart; one on another port is, at the client address's host.
func TestTCPAdvertised(t *testing.T) {
	for _, tc := range []struct {
		client string
		tcp    net.Addr
		want   string
	}{
		{"felix-1:5000", &net.TCPAddr{IP: net.IPv4zero, Port: 5000}, ""},
		{"felix-1:5000", &net.TCPAddr{IP: net.IPv4zero, Port: 5443}, "felix-1:5443"},
		{"felix-1:5000", nil, ""},
	} {
		if got := tcpAdvertised(tc.client, tc.tcp); got != tc.want {
			t.Errorf("tcpAdvertised(%q, %v) = %q, want %q", tc.client, tc.tcp, got, tc.want)
		}
	}
}

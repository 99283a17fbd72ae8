package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// scriptedViews is a ClusterViewSource: it answers the view set last
// (unchanged when asked with its tag), or the errors queued, and reports
// every call's known tag on calls.
type scriptedViews struct {
	calls chan string
	mu    sync.Mutex
	view  wire.ClusterView
	errs  []error
}

func newScriptedViews(v wire.ClusterView) *scriptedViews {
	return &scriptedViews{calls: make(chan string, 1024), view: v}
}

func (f *scriptedViews) set(v wire.ClusterView) {
	f.mu.Lock()
	f.view = v
	f.mu.Unlock()
}

func (f *scriptedViews) fail(errs ...error) {
	f.mu.Lock()
	f.errs = append(f.errs, errs...)
	f.mu.Unlock()
}

func (f *scriptedViews) ClusterView(_ context.Context, known string) (wire.ClusterView, bool, error) {
	select {
	case f.calls <- known:
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return wire.ClusterView{}, false, err
	}
	if known == f.view.Tag {
		return wire.ClusterView{}, false, nil
	}
	return f.view, true, nil
}

// selfView is a view of broker-7 (live, with an address) owning the
// stream shards of s listed, and broker-8 owning t/ns/other's shard 0.
func selfView(tag string, as ...wire.ShardAssignment) wire.ClusterView {
	brokers := []wire.Broker{
		{BrokerRegistration: wire.BrokerRegistration{NodeID: "broker-7", ClientAddrs: []string{"127.0.0.1:1"}}, State: wire.BrokerLive},
		{BrokerRegistration: wire.BrokerRegistration{NodeID: "broker-8", ClientAddrs: []string{"127.0.0.1:2"}}, State: wire.BrokerLive},
	}
	return wire.ClusterView{Tag: tag, Brokers: brokers, Assignments: append(as, sa("other", 0, "broker-8", 1, ""))}
}

// startClustered starts broker-7 in a cluster whose view comes from
// views (polled every interval) and registering with reg (nil: none).
func startClustered(t *testing.T, views ClusterViewSource, reg Registry, interval time.Duration) *Server {
	t.Helper()
	cfg := testConfig()
	cfg.ClusterViewInterval = interval
	cfg.Node = NodeConfig{ID: "broker-7", HeartbeatInterval: time.Millisecond}
	if reg != nil {
		cfg.Durable.StorageDir = t.TempDir()
	}
	srv := newTestBroker(t, cfg, Deps{Registry: reg, Cluster: views})
	mustNil(t, srv.Start(context.Background()))
	return srv
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func metricsText(s *Server) string {
	var out strings.Builder
	s.WriteMetrics(&out)
	return out.String()
}

func route0(s *Server, name string) Route {
	return s.routes.Route(wire.ShardKindStream, "t", "ns", name, 0)
}

// Start applies the first view before it returns; the loop then polls
// with the tag held, applies a changed view, and survives failures.
func TestBrokerPollsClusterView(t *testing.T) {
	views := newScriptedViews(selfView("v1", sa("s", 0, "broker-7", 1, "")))
	srv := startClustered(t, views, nil, 10*time.Millisecond)
	if first := receive(t, views.calls, "first fetch"); first != "" {
		t.Fatalf("first fetch sent known=%q", first)
	}
	if srv.routes.Tag() != "v1" || !route0(srv, "s").Local || route0(srv, "other").NodeID != "broker-8" {
		t.Fatalf("after Start: tag %q, s/0 %+v", srv.routes.Tag(), route0(srv, "s"))
	}
	// Polls send the tag held and change nothing while it is current.
	for range 3 {
		if known := receive(t, views.calls, "poll"); known != "v1" {
			t.Fatalf("poll sent known=%q, want v1", known)
		}
	}
	// Failures are counted and survived.
	views.fail(errors.New("connection refused"), errors.New("connection refused"), errors.New("HTTP 503"))
	for range 4 {
		receive(t, views.calls, "poll through failures")
	}
	views.set(selfView("v2", sa("s", 0, "broker-8", 2, "")))
	for srv.routes.Tag() != "v2" {
		receive(t, views.calls, "poll that brings v2")
	}
	if r := route0(srv, "s"); r.NodeID != "broker-8" || r.Generation != 2 {
		t.Fatalf("after v2: %+v", r)
	}
	m := metricsText(srv)
	for _, want := range []string{"felix_broker_cluster_views_applied_total 2", "felix_broker_cluster_view_errors_total 3", "felix_broker_lease_held 1"} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, m)
		}
	}
	// After Shutdown nothing polls.
	mustNil(t, srv.Shutdown(context.Background()))
	for len(views.calls) > 0 {
		<-views.calls
	}
	time.Sleep(30 * time.Millisecond) // three intervals
	if len(views.calls) != 0 {
		t.Fatal("polled after Shutdown")
	}
}

// Start waits (bounded) until the first view shows no placement still
// pending: a shard not_assigned while a broker serves is asked again.
func TestBrokerFirstViewWaitsForPlacement(t *testing.T) {
	views := newScriptedViews(selfView("v1", sa("s", 0, "", 0, wire.UnavailableNotAssigned)))
	placed := make(chan struct{})
	go func() {
		defer close(placed)
		receive(t, views.calls, "first fetch")
		views.set(selfView("v2", sa("s", 0, "broker-7", 1, "")))
	}()
	srv := startClustered(t, views, nil, time.Minute)
	<-placed
	if !route0(srv, "s").Local || srv.routes.Tag() != "v2" {
		t.Fatalf("Start returned with the placement pending: tag %s, %+v", srv.routes.Tag(), route0(srv, "s"))
	}
}

// A control plane that does not answer does not fail the start: routes
// answer not_ready until a view arrives.
func TestBrokerStartsWithoutAView(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the first view's bound")
	}
	views := newScriptedViews(selfView("v1", sa("s", 0, "broker-7", 1, "")))
	fails := make([]error, 10_000)
	for i := range fails {
		fails[i] = errors.New("connection refused")
	}
	views.fail(fails...)
	srv := startClustered(t, views, nil, time.Minute)
	if r := route0(srv, "s"); r.Unavailable != unavailableNotReady {
		t.Fatalf("without a view: %+v", r)
	}
	views.mu.Lock()
	views.errs = nil
	views.mu.Unlock()
	if r := srv.route(context.Background(), wire.ShardKindStream, "t", "ns", "s", 0); !r.Local {
		t.Fatalf("route after the control plane answered: %+v", r)
	}
}

// A shard the view does not place yet is looked up once more before the
// route is answered; one the view places is not.
func TestBrokerRouteRefreshesNotAssigned(t *testing.T) {
	views := newScriptedViews(selfView("v1", sa("s", 0, "broker-7", 1, "")))
	srv := startClustered(t, views, nil, time.Minute) // the loop stays out of the way
	receive(t, views.calls, "first fetch")
	views.set(selfView("v2", sa("s", 0, "broker-7", 1, ""), sa("new", 0, "broker-7", 2, "")))
	if r := route0(srv, "new"); r.Unavailable != wire.UnavailableNotAssigned {
		t.Fatalf("before the refresh: %+v", r)
	}
	if r := srv.route(context.Background(), wire.ShardKindStream, "t", "ns", "new", 0); !r.Local || r.Generation != 2 {
		t.Fatalf("after the refresh: %+v", r)
	}
	if known := receive(t, views.calls, "refresh"); known != "v1" {
		t.Fatalf("refresh sent known=%q", known)
	}
	if r := srv.route(context.Background(), wire.ShardKindStream, "t", "ns", "s", 0); !r.Local {
		t.Fatalf("placed shard: %+v", r)
	}
	select {
	case known := <-views.calls:
		t.Fatalf("a placed shard's route fetched the view (known=%q)", known)
	default:
	}
}

// Heartbeat answers renew the lease: the broker serves its shards while
// the last answered heartbeat was sent less than the expiry timeout ago.
func TestBrokerLeaseFromHeartbeats(t *testing.T) {
	reg := newFakeRegistry()
	reg.expiryMs = 60_000
	var skew atomic.Int64 // added to the route table's clock
	views := newScriptedViews(selfView("v1", sa("s", 0, "broker-7", 1, "")))
	cfg := testConfig()
	cfg.ClusterViewInterval = time.Minute
	cfg.Node = NodeConfig{ID: "broker-7", HeartbeatInterval: time.Millisecond}
	cfg.Durable.StorageDir = t.TempDir()
	srv := newTestBroker(t, cfg, Deps{Registry: reg, Cluster: views})
	srv.routes.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	start := time.Now()
	mustNil(t, srv.Start(context.Background()))
	receive(t, reg.hbC, "heartbeat")
	receive(t, reg.hbC, "a second heartbeat") // the first one's answer was applied
	until := srv.routes.leaseExpiry()
	if until.Before(start.Add(time.Minute)) || until.After(time.Now().Add(time.Minute)) {
		t.Fatalf("lease until %v; want a minute after a heartbeat sent since %v", until, start)
	}
	if !route0(srv, "s").Local || !strings.Contains(metricsText(srv), "felix_broker_lease_held 1") {
		t.Fatalf("with the lease: %+v", route0(srv, "s"))
	}
	// Two minutes on, with heartbeats still sent now: lapsed.
	skew.Store(int64(2 * time.Minute))
	if r := route0(srv, "s"); r.Unavailable != unavailableNotReady {
		t.Fatalf("lease lapsed: %+v", r)
	}
	if r := srv.route(context.Background(), wire.ShardKindStream, "t", "ns", "s", 0); r.Unavailable != unavailableNotReady {
		t.Fatalf("lease lapsed, through route: %+v", r)
	}
	if m := metricsText(srv); !strings.Contains(m, "felix_broker_lease_held 0") {
		t.Fatalf("metrics with the lease lapsed:\n%s", m)
	}
	skew.Store(0)
	if !route0(srv, "s").Local {
		t.Fatal("lease not held again")
	}
}

func TestClusterViewIntervalFromEnv(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "FELIX_CLUSTER_VIEW_INTERVAL_MS" {
				return v
			}
			return ""
		}
	}
	c, err := ConfigFromEnv(env(""))
	if err != nil || c.ClusterViewInterval != DefaultClusterViewInterval {
		t.Fatalf("default: %v %v", c.ClusterViewInterval, err)
	}
	if c, err = ConfigFromEnv(env("250")); err != nil || c.ClusterViewInterval != 250*time.Millisecond {
		t.Fatalf("250: %v %v", c.ClusterViewInterval, err)
	}
	for _, bad := range []string{"5", "60001", "x"} {
		if _, err := ConfigFromEnv(env(bad)); err == nil || !strings.Contains(err.Error(), "FELIX_CLUSTER_VIEW_INTERVAL_MS") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

// A stream the catalog brings before the view places it fetches the
// view, so its shard is open when the catalog step returns; when the view
// still lacks it, the loop fetches again at once.
func TestBrokerNewStreamFetchesTheView(t *testing.T) {
	views := newScriptedViews(selfView("v1", sa("s", 0, "broker-7", 1, "")))
	srv := startClustered(t, views, nil, time.Minute) // the loop stays out of the way
	receive(t, views.calls, "first fetch")
	fresh := sa("fresh", 0, "broker-7", 2, "")
	views.set(selfView("v2", sa("s", 0, "broker-7", 1, ""), fresh))
	spec := wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "fresh", Shards: 1, Incarnation: fresh.Incarnation}
	mustNil(t, srv.state.ApplyStream(spec))
	if srv.routes.Tag() != "v2" {
		t.Fatalf("view after the stream was applied: %s", srv.routes.Tag())
	}
	st, ok := srv.core.Stream(core.StreamKey{Tenant: "t", Namespace: "ns", Stream: "fresh"})
	if !ok {
		t.Fatal("stream not in the core")
	}
	if _, err := st.Shard(0); err != nil {
		t.Fatalf("shard 0 not open: %v", err)
	}
	receive(t, views.calls, "the stream's fetch")

	// Placed already: no fetch. Not placed even after a fetch: one more.
	mustNil(t, srv.state.ApplyStream(spec))
	select {
	case known := <-views.calls:
		t.Fatalf("a placed stream fetched the view (known=%q)", known)
	default:
	}
	late := wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "late", Shards: 1, Incarnation: "i"}
	mustNil(t, srv.state.ApplyStream(late))
	if known := receive(t, views.calls, "the late stream's fetch"); known != "v2" {
		t.Fatalf("fetch sent known=%q", known)
	}
	if known := receive(t, views.calls, "the loop's fetch at once"); known != "v2" {
		t.Fatalf("fetch sent known=%q", known)
	}
}

// watchedViews is a scriptedViews that can also watch: a watch call
// holds until the view is set to another tag (or its wait passes).
type watchedViews struct {
	*scriptedViews
	changed chan struct{} // one slot: set was called
}

func (f *watchedViews) set(v wire.ClusterView) {
	f.scriptedViews.set(v)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *watchedViews) WaitClusterViewChange(ctx context.Context, known string, wait time.Duration) (string, bool, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		f.mu.Lock()
		tag := f.view.Tag
		f.mu.Unlock()
		if tag != known {
			return tag, true, nil
		}
		select {
		case <-f.changed:
		case <-t.C:
			return "", false, nil
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
	}
}

// With a source that can watch, a changed view is applied as soon as
// the watch announces it, though the poll is an hour away.
func TestBrokerWatchesClusterView(t *testing.T) {
	views := &watchedViews{scriptedViews: newScriptedViews(selfView("v1", sa("s", 0, "broker-7", 1, ""))), changed: make(chan struct{}, 1)}
	srv := startClustered(t, views, nil, maxClusterViewInterval)
	if srv.routes.Tag() != "v1" {
		t.Fatalf("after Start: tag %q", srv.routes.Tag())
	}
	views.set(selfView("v2", sa("s", 0, "broker-8", 2, "")))
	deadline := time.Now().Add(5 * time.Second)
	for srv.routes.Tag() != "v2" {
		if time.Now().After(deadline) {
			t.Fatalf("the watched change was not applied: tag %q", srv.routes.Tag())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := route0(srv, "s"); r.NodeID != "broker-8" || r.Generation != 2 {
		t.Fatalf("s/0 after the change: %+v", r)
	}
	if !strings.Contains(metricsText(srv), "felix_broker_cluster_view_wakeups_total 1") {
		t.Fatalf("wakeups not counted:\n%s", metricsText(srv))
	}
}

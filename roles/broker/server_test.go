package broker

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

const pubAll = "stream.*:stream:acme"

func TestAuthRefusals(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	other, _ := auth.GenerateSigningKey()
	forged, err := auth.NewSigner(other).Sign(auth.Claims{Subject: "x", TenantID: testTenant, Perms: []string{"*:*"}, Expiry: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		tenant string
		token  string
	}{
		{"bad signature", testTenant, forged},
		{"expired", testTenant, e.tokenFor(testTenant, time.Now().Add(-time.Minute), "*:*")},
		{"wrong tenant", "other", e.token("*:*")},
		{"garbage token", testTenant, "not.a.jwt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openStream(t, qc)
			expectCode(t, s.auth(c.tenant, c.token, 0, allFeatures), wire.CodeUnauthorized)
			s.expectEnd()
		})
	}
	t.Run("publish before auth", func(t *testing.T) {
		s := openStream(t, qc)
		s.write(binPublish("events", true, 1, []byte("x")))
		// No auth frame offered FEATURE_ERROR_CODES, so only the message travels.
		if m, ok := s.recv().(*wire.ErrorMsg); !ok || m.Code != "" || !strings.Contains(m.Message, "auth required") {
			t.Fatalf("got %#v", m)
		}
		s.expectEnd()
	})
	t.Run("missing permission", func(t *testing.T) {
		sub := e.authed(qc, 0, allFeatures, pubAll)
		events := e.subscribe(qc, sub, "events")
		s := e.authed(qc, 0, allFeatures, "stream.subscribe:stream:acme")
		s.write(binPublish("events", true, 7, []byte("refused")))
		pe := s.recv().(*wire.PublishError)
		if pe.RequestID != 7 || pe.Code != wire.CodeForbidden || pe.Retry != wire.RetryFatal {
			t.Fatalf("got %#v", pe)
		}
		ok := e.authed(qc, 0, allFeatures, pubAll)
		ok.write(binPublish("events", true, 8, numbered(0)))
		if m, isOK := ok.recv().(*wire.PublishOK); !isOK || m.RequestID != 8 {
			t.Fatalf("got %#v", m)
		}
		checkOrder(t, events.payloads(1), 1)
	})
	// Four refused tokens and one publish before auth; the refused
	// permission is not an authentication failure.
	if n := e.metric("felix_broker_auth_failures_total"); n != 5 {
		t.Fatalf("auth failures counted %v, want 5", n)
	}
}

func TestPublishSubscribeInOrder(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	binSub := e.subscribe(qc, e.authed(qc, wire.FlagBinaryEventBatchShared, allFeatures, pubAll), "events")
	jsonSub := e.subscribe(qc, e.authed(qc, 0, allFeatures, pubAll), "events")
	pub := e.authed(qc, 0, allFeatures, pubAll)
	const n = 300
	for i := 0; i < n; i += 3 {
		switch i % 2 {
		case 0: // fire-and-forget binary batch
			pub.write(binPublish("events", false, 0, numbered(i), numbered(i+1), numbered(i+2)))
		default: // JSON batch with an ack
			pub.send(&wire.PublishBatch{TenantID: testTenant, Namespace: "prod", Stream: "events",
				Payloads: [][]byte{numbered(i), numbered(i + 1), numbered(i + 2)}, RequestID: uint64(i), Ack: wire.AckPerBatch})
		}
	}
	checkOrder(t, binSub.payloads(n), n)
	checkOrder(t, jsonSub.payloads(n), n)
	for i := 0; i < n/6; i++ {
		if _, ok := pub.recv().(*wire.PublishOK); !ok {
			t.Fatal("want publish_ok")
		}
	}
}

func TestAckedPublish(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events", Shards: 4})
	qc := e.dial(0)
	for _, features := range []uint64{allFeatures, allFeatures | wire.FeatureAckOnCommit} {
		s := e.authed(qc, wire.FlagBinaryPublishAckOffset, features, pubAll)
		s.send(&wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "events", Payload: []byte("a"),
			Key: []byte("k1"), RequestID: 11, Ack: wire.AckPerMessage})
		ok := s.recv().(*wire.PublishOK)
		if ok.RequestID != 11 || ok.Offset != nil {
			t.Fatalf("got %#v", ok)
		}
		p := wire.BinaryPublish{RequestID: 12, Key: []byte("k2"), TenantID: testTenant, Namespace: "prod", Stream: "events", Payloads: [][]byte{[]byte("b")}}
		s.write(p.AppendFrame(nil, wire.PublishFlags(true, true)))
		if ok := s.recv().(*wire.PublishOK); ok.RequestID != 12 {
			t.Fatalf("got %#v", ok)
		}
	}
}

func TestUnknownStreamNotFound(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, pubAll)
	s.write(binPublish("nope", true, 3, []byte("x")))
	pe := s.recv().(*wire.PublishError)
	if pe.Code != wire.CodeNotFound || pe.Retry != wire.RetryRetryAfter || pe.RequestID != 3 ||
		pe.Message != "stream not found: tenant=acme namespace=prod stream=nope" {
		t.Fatalf("got %#v", pe)
	}
	s.send(&wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "nope"})
	expectCode(t, s.recv(), wire.CodeNotFound)
	s.send(&wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "events", Shard: ptr[uint32](3)})
	expectCode(t, s.recv(), wire.CodeInvalidRequest)
	// Without FEATURE_ERROR_CODES only the message travels.
	plain := e.authed(qc, 0, 0, pubAll)
	plain.write(binPublish("nope", true, 4, []byte("x")))
	if pe := plain.recv().(*wire.PublishError); pe.Code != "" || pe.Retry != "" || pe.Message == "" {
		t.Fatalf("got %#v", pe)
	}
}

func ptr[T any](v T) *T { return &v }

func TestCacheOverTheWire(t *testing.T) {
	e := startEnv(t, testConfig())
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, "cache.*:cache:acme/prod")
	s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "u1", Value: []byte("v1"), RequestID: 1})
	if ok := s.recv().(*wire.CacheOK); ok.RequestID != 1 {
		t.Fatalf("got %#v", ok)
	}
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "u1", RequestID: 2})
	if v := s.recv().(*wire.CacheValue); v.RequestID != 2 || !bytes.Equal(v.Value, []byte("v1")) {
		t.Fatalf("got %#v", v)
	}
	s.send(&wire.CacheDelete{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "u1", RequestID: 3})
	if v := s.recv().(*wire.CacheValue); v.RequestID != 3 || !bytes.Equal(v.Value, []byte("v1")) {
		t.Fatalf("got %#v", v)
	}
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "u1", RequestID: 4})
	if v := s.recv().(*wire.CacheValue); v.RequestID != 4 || v.Value != nil {
		t.Fatalf("got %#v", v)
	}
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "nope", Key: "u1", RequestID: 5})
	expectCode(t, s.recv(), wire.CodeNotFound)
	ro := e.authed(qc, 0, allFeatures, "cache.read:cache:acme/prod/sessions")
	ro.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "u1", Value: []byte("v"), RequestID: 6})
	expectCode(t, ro.recv(), wire.CodeForbidden)
	ro.send(&wire.CacheGet{TenantID: "other", Namespace: "prod", Cache: "sessions", Key: "u1", RequestID: 7})
	expectCode(t, ro.recv(), wire.CodeForbidden)
}

func TestSubscriptionLimit(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSubscriptionsPerConn = 2
	e := startEnv(t, cfg, wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, pubAll)
	e.subscribe(qc, s, "events")
	e.subscribe(qc, s, "events")
	s.send(&wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "events"})
	expectCode(t, s.recv(), wire.CodeOverloaded)
	// Another connection has its own limit.
	qc2 := e.dial(0)
	e.subscribe(qc2, e.authed(qc2, 0, allFeatures, pubAll), "events")
}

func TestConnectionsPerSource(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnectionsPerSource = 1
	e := startEnv(t, cfg, wire.StreamSpec{Stream: "events"})
	first := e.dial(0)
	e.authed(first, 0, allFeatures, pubAll)
	second := e.dial(0)
	select {
	case <-second.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("second connection from the same source was not closed")
	}
	e.authed(first, 0, allFeatures, pubAll)
}

func TestHTTPEndpoints(t *testing.T) {
	tlsCfg, _ := testTLS(t)
	idle, err := New(testConfig(), Deps{Catalog: &fakeSource{}, TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	if got := httpStatus(idle.HTTPHandler(), "/ready"); got != 503 {
		t.Fatalf("/ready before the first sync: %d", got)
	}
	idle.Shutdown(t.Context())
	e := startEnv(t, testConfig())
	h := e.srv.HTTPHandler()
	for path, want := range map[string]int{"/live": 200, "/ready": 200, "/metrics": 200} {
		if got := httpStatus(h, path); got != want {
			t.Fatalf("%s: %d", path, got)
		}
	}
	got := scrape(t, h)
	for _, name := range brokerMetricNames {
		if _, ok := got[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	// The process-wide Go and process metrics, once (scrape fails on a
	// repeated sample).
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := got[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if err := e.shutdown(); err != nil {
		t.Fatal(err)
	}
	if got := httpStatus(h, "/ready"); got != 503 {
		t.Fatalf("/ready after shutdown: %d", got)
	}
}

// brokerMetricNames are the metrics a broker's /metrics always carries,
// named as the spec and the dashboards name them.
var brokerMetricNames = []string{
	// The network service's.
	"felix_broker_connections", "felix_sub_active_connections", "felix_broker_subscriptions",
	"felix_broker_ingress_queue_depth", "felix_broker_out_ack_depth", "felix_publish_messages_total",
	"felix_publish_bytes_total", "felix_delivered_messages_total", "felix_broker_acked_publishes_dropped_total",
	"felix_broker_auth_failures_total", "felix_broker_connections_refused_total",
	"felix_broker_ingress_dropped_total", "felix_broker_revoked_streams_total",
	// The core's.
	"felix_sub_queue_dropped_total", "felix_sub_queue_drop_old_emulated_total", "felix_subscribe_dropped_total",
	"felix_event_frames_encoded_total", "felix_cache_watches", "felix_cache_watch_changes_delivered_total",
	"felix_cache_watch_lagged_total", "felix_cache_watch_history_bytes", "felix_cache_watch_queued_bytes",
	"felix_durable_shards_refused_total", "felix_durable_publish_no_space_total",
	"felix_subscriptions_lagged_total", "felix_durable_replay_records_total", "felix_durable_logs",
	"felix_durable_log_bytes", "felix_durable_log_segments", "felix_durable_appends_total",
	"felix_durable_fsyncs_total", "felix_durable_fsync_seconds_total",
}

// scrape reads h's /metrics into its samples, by name with labels; a
// sample that appears twice fails the test.
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	out := map[string]float64{}
	for line := range strings.Lines(rec.Body.String()) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		name := line[:i]
		if _, dup := out[name]; dup {
			t.Fatalf("/metrics repeats %s", name)
		}
		out[name] = v
	}
	return out
}

// Two brokers in one process each count only their own traffic, on their
// own /metrics.
func TestBrokersInOneProcessKeepTheirOwnMetrics(t *testing.T) {
	a, b := startDurable(t, testConfig()), startDurable(t, testConfig())
	publish := func(e *env, n int) {
		qc := e.dial(0)
		s := e.authed(qc, 0, allFeatures, pubAll)
		for i := range n {
			s.write(binPublish("log", true, uint64(i+1), numbered(i)))
			if ok, isOK := s.recv().(*wire.PublishOK); !isOK || ok.RequestID != uint64(i+1) {
				t.Fatalf("publish %d not acked: %#v", i, ok)
			}
		}
		// A refused token, counted by this broker alone.
		bad := openStream(t, qc)
		expectCode(t, bad.auth(testTenant, "not.a.jwt", 0, allFeatures), wire.CodeUnauthorized)
	}
	publish(a, 3)
	publish(b, 7)
	for _, c := range []struct {
		name string
		e    *env
		n    float64
	}{{"a", a, 3}, {"b", b, 7}} {
		got := scrape(t, c.e.srv.HTTPHandler())
		want := map[string]float64{
			"felix_publish_messages_total":     c.n,
			"felix_publish_bytes_total":        c.n * float64(len(numbered(0))+core.PayloadOverhead),
			"felix_durable_appends_total":      c.n,
			"felix_durable_logs":               1,
			"felix_broker_connections":         1,
			"felix_broker_auth_failures_total": 1,
		}
		for name, v := range want {
			if got[name] != v {
				t.Errorf("broker %s: %s = %v, want %v", c.name, name, got[name], v)
			}
		}
	}
}

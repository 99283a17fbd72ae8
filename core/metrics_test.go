package core

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/felixmq/felix/wire"
)

// metricValue reads one sample of a broker's metric set as scraped; a
// name the set does not hold fails the test.
func metricValue(t *testing.T, b *Broker, name string) float64 {
	t.Helper()
	var buf bytes.Buffer
	b.Metrics().WritePrometheus(&buf)
	for line := range strings.Lines(buf.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in the metrics", name)
	return 0
}

// Two brokers in one process keep their own metrics: each one's set
// counts only what was published to it.
func TestBrokersKeepTheirOwnMetrics(t *testing.T) {
	type counts struct{ drops, appends, encodes float64 }
	run := func(n int) (*Broker, counts) {
		b, st := newTestStream(t, Config{Storage: &StorageConfig{Dir: t.TempDir()}}, 1, "")
		if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "d", Durable: true}); err != nil {
			t.Fatal(err)
		}
		d, _ := b.Stream(StreamKey{"t", "ns", "d"})
		sh, dsh := shard0(t, st), shard0(t, d)
		slow := subscribe(t, sh, SubscribeOptions{Capacity: 1})
		for range n {
			publish(t, sh, payloads(2, "m"))
			publish(t, dsh, payloads(1, "d"))
		}
		e, ok := slow.TryNext()
		if !ok {
			t.Fatal("the slow subscriber got nothing")
		}
		e.Frame(0)
		e.Frame(wire.FlagEventBatchOffsets)
		return b, counts{drops: float64(n - 1), appends: float64(n), encodes: 2}
	}
	a, wantA := run(3)
	b, wantB := run(7)
	for _, c := range []struct {
		b    *Broker
		want counts
	}{{a, wantA}, {b, wantB}} {
		got := counts{
			drops:   metricValue(t, c.b, "felix_sub_queue_dropped_total"),
			appends: metricValue(t, c.b, "felix_durable_appends_total"),
			encodes: metricValue(t, c.b, "felix_event_frames_encoded_total"),
		}
		if got != c.want {
			t.Errorf("got %+v, want %+v", got, c.want)
		}
		if n := metricValue(t, c.b, "felix_durable_logs"); n != 1 {
			t.Errorf("%v durable logs, want 1", n)
		}
	}
}

// Every core metric is in a broker's set from the start, under the name
// the spec gives it.
func TestBrokerMetricNames(t *testing.T) {
	b := NewBroker(Config{})
	defer b.Close()
	for _, name := range []string{
		"felix_sub_queue_dropped_total",
		"felix_sub_queue_drop_old_emulated_total",
		"felix_subscribe_dropped_total",
		"felix_event_frames_encoded_total",
		"felix_cache_watches",
		"felix_cache_watch_changes_delivered_total",
		"felix_cache_watch_lagged_total",
		"felix_cache_watch_history_bytes",
		"felix_cache_watch_queued_bytes",
		"felix_durable_shards_refused_total",
		"felix_durable_publish_no_space_total",
		"felix_subscriptions_lagged_total",
		"felix_durable_replay_records_total",
		"felix_durable_logs",
		"felix_durable_log_bytes",
		"felix_durable_log_segments",
		"felix_durable_appends_total",
		"felix_durable_fsyncs_total",
		"felix_durable_fsync_seconds_total",
	} {
		if v := metricValue(t, b, name); v != 0 {
			t.Errorf("%s is %v in a new broker", name, v)
		}
	}
}

package core

import (
	"sync"

	"github.com/VictoriaMetrics/metrics"

	flog "github.com/felixmq/felix/log"
)

// durableHelp is the HELP text of the durable-storage metric families.
var durableHelp = map[string]string{
	"felix_durable_shards_refused_total":   "Durable shards left unavailable because their log could not be claimed or opened.",
	"felix_durable_publish_no_space_total": "Durable publishes refused because the disk had no space.",
	"felix_subscriptions_lagged_total":     "Durable subscriptions ended lagged because their queue had to drop a batch (the client resumes from the offset given).",
	"felix_durable_replay_records_total":   "Records replayed from durable logs to resuming subscribers.",
	"felix_durable_streams_held":           "Stream directories on disk that no served stream owns (kept, not deleted).",
	"felix_durable_logs":                   "Durable logs open on this broker (one per durable shard).",
	"felix_durable_log_bytes":              "Bytes on disk of the open durable logs.",
	"felix_durable_log_segments":           "Segments of the open durable logs.",
	"felix_durable_appends_total":          "Records appended to durable logs since the broker started.",
	"felix_durable_fsyncs_total":           "fsync calls made by durable logs since the broker started.",
	"felix_durable_fsync_seconds_total":    "Seconds spent in fsync by durable logs since the broker started.",
}

// durableMetrics are a broker's durable-storage metrics. The log package
// registers nothing itself (a broker holds many logs); the broker sums
// the Stats of its open logs at scrape time.
type durableMetrics struct {
	shardsRefused *metrics.Counter
	noSpace       *metrics.Counter
	subsLagged    *metrics.Counter
	replayRecords *metrics.Counter
	// streamsHeld counts the stream directories on disk that no served
	// stream owns (set by Broker.HeldStreams).
	streamsHeld *metrics.Gauge

	mu sync.Mutex
	// open are the broker's logs whose Stats the gauges sum; closed keeps
	// the running totals of its logs closed since, so that the *_total
	// series never go down. Both guarded by mu.
	open   map[*flog.Log]struct{}
	closed flog.Stats
}

func (d *durableMetrics) register(s *metrics.Set) {
	d.open = map[*flog.Log]struct{}{}
	d.shardsRefused = s.NewCounter("felix_durable_shards_refused_total")
	d.noSpace = s.NewCounter("felix_durable_publish_no_space_total")
	d.subsLagged = s.NewCounter("felix_subscriptions_lagged_total")
	d.replayRecords = s.NewCounter("felix_durable_replay_records_total")
	d.streamsHeld = s.NewGauge("felix_durable_streams_held", nil)
	s.NewGauge("felix_durable_logs", func() float64 {
		d.mu.Lock()
		defer d.mu.Unlock()
		return float64(len(d.open))
	})
	s.NewGauge("felix_durable_log_bytes", d.sum(func(s flog.Stats) float64 { return float64(s.Bytes) }))
	s.NewGauge("felix_durable_log_segments", d.sum(func(s flog.Stats) float64 { return float64(s.Segments) }))
	s.NewGauge("felix_durable_appends_total", d.sum(func(s flog.Stats) float64 { return float64(s.Appends) }))
	s.NewGauge("felix_durable_fsyncs_total", d.sum(func(s flog.Stats) float64 { return float64(s.Fsyncs) }))
	s.NewGauge("felix_durable_fsync_seconds_total", d.sum(func(s flog.Stats) float64 { return float64(s.FsyncNanos) / 1e9 }))
}

// sum returns a gauge callback adding f over the closed totals and every
// open log.
func (d *durableMetrics) sum(f func(flog.Stats) float64) func() float64 {
	return func() float64 {
		// The logs are read outside mu: each has its own lock.
		d.mu.Lock()
		total := f(d.closed)
		open := make([]*flog.Log, 0, len(d.open))
		for l := range d.open {
			open = append(open, l)
		}
		d.mu.Unlock()
		for _, l := range open {
			total += f(l.Stats())
		}
		return total
	}
}

// addLog starts summing l.
func (d *durableMetrics) addLog(l *flog.Log) {
	d.mu.Lock()
	d.open[l] = struct{}{}
	d.mu.Unlock()
}

// removeLog stops summing l, keeping its running totals (not its size,
// which is gone with it).
func (d *durableMetrics) removeLog(l *flog.Log) {
	s := l.Stats()
	d.mu.Lock()
	delete(d.open, l)
	d.closed.Appends += s.Appends
	d.closed.Fsyncs += s.Fsyncs
	d.closed.FsyncNanos += s.FsyncNanos
	d.mu.Unlock()
}

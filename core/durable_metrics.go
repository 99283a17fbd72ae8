package core

import (
	"sync"

	"github.com/VictoriaMetrics/metrics"

	flog "github.com/felixmq/felix/log"
)

// Durable-storage metrics. The log package registers nothing itself (a
// process holds many logs); core sums their Stats at scrape time.
var (
	durableShardsRefused = metrics.GetOrCreateCounter("felix_durable_shards_refused_total")
	durableNoSpace       = metrics.GetOrCreateCounter("felix_durable_publish_no_space_total")
	subscriptionsLagged  = metrics.GetOrCreateCounter("felix_subscriptions_lagged_total")
	durableReplayRecords = metrics.GetOrCreateCounter("felix_durable_replay_records_total")

	// openLogs are the logs whose Stats the gauges sum; closedTotals keeps
	// the running totals of logs closed since, so that the *_total series
	// never go down. Both guarded by openLogsMu.
	openLogs     = map[*flog.Log]struct{}{}
	closedTotals flog.Stats
	openLogsMu   sync.Mutex
)

func init() {
	sum := func(f func(flog.Stats) float64) func() float64 {
		return func() float64 {
			openLogsMu.Lock()
			defer openLogsMu.Unlock()
			total := f(closedTotals)
			for l := range openLogs {
				total += f(l.Stats())
			}
			return total
		}
	}
	metrics.NewGauge("felix_durable_logs", func() float64 {
		openLogsMu.Lock()
		defer openLogsMu.Unlock()
		return float64(len(openLogs))
	})
	metrics.NewGauge("felix_durable_log_bytes", sum(func(s flog.Stats) float64 { return float64(s.Bytes) }))
	metrics.NewGauge("felix_durable_log_segments", sum(func(s flog.Stats) float64 { return float64(s.Segments) }))
	metrics.NewGauge("felix_durable_appends_total", sum(func(s flog.Stats) float64 { return float64(s.Appends) }))
	metrics.NewGauge("felix_durable_fsyncs_total", sum(func(s flog.Stats) float64 { return float64(s.Fsyncs) }))
	metrics.NewGauge("felix_durable_fsync_seconds_total", sum(func(s flog.Stats) float64 { return float64(s.FsyncNanos) / 1e9 }))
}

func registerLog(l *flog.Log) {
	openLogsMu.Lock()
	openLogs[l] = struct{}{}
	openLogsMu.Unlock()
}

// unregisterLog stops summing l, keeping its running totals (not its
// size, which is gone with it).
func unregisterLog(l *flog.Log) {
	s := l.Stats()
	openLogsMu.Lock()
	delete(openLogs, l)
	closedTotals.Appends += s.Appends
	closedTotals.Fsyncs += s.Fsyncs
	closedTotals.FsyncNanos += s.FsyncNanos
	openLogsMu.Unlock()
}

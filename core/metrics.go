package core

import (
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Process-wide counters (VictoriaMetrics default set).
var (
	// subQueueDropped counts every batch dropped on the subscribe path,
	// whatever the policy.
	subQueueDropped = metrics.GetOrCreateCounter("felix_sub_queue_dropped_total")
	// dropOldEmulated counts the drops of DropOld streams, which behave as
	// DropNew.
	dropOldEmulated = metrics.GetOrCreateCounter("felix_sub_queue_drop_old_emulated_total")
	// subscribeDropped counts subscribers the broker ended (stream deleted
	// or replaced, broker closed), as opposed to closed by their owner.
	subscribeDropped = metrics.GetOrCreateCounter("felix_subscribe_dropped_total")
	// framesEncodedMetric mirrors framesEncoded.
	framesEncodedMetric = metrics.GetOrCreateCounter("felix_event_frames_encoded_total")

	// Cache watches: open watches, values and changes handed to their
	// owners, watches ended lagged, bytes of change history held and of
	// changes queued for watches.
	cacheWatchesGauge   = metrics.GetOrCreateGauge("felix_cache_watches", nil)
	cacheWatchDelivered = metrics.GetOrCreateCounter("felix_cache_watch_changes_delivered_total")
	cacheWatchLagged    = metrics.GetOrCreateCounter("felix_cache_watch_lagged_total")
	_                   = metrics.GetOrCreateGauge("felix_cache_watch_history_bytes", func() float64 {
		return liveWatchEnvs.sum(func(e *watchEnv) int64 { return e.historyUsed.Load() })
	})
	_ = metrics.GetOrCreateGauge("felix_cache_watch_queued_bytes", func() float64 {
		return liveWatchEnvs.sum(func(e *watchEnv) int64 { return e.total.Load() })
	})
)

// liveWatchEnvs are the watch environments of the open brokers: the two
// byte gauges above are their counters summed when scraped, so the hot
// path keeps one atomic per change (the bound's) instead of two.
var liveWatchEnvs = watchEnvSet{m: map[*watchEnv]struct{}{}}

type watchEnvSet struct {
	mu sync.Mutex
	m  map[*watchEnv]struct{}
}

func (s *watchEnvSet) add(e *watchEnv) {
	s.mu.Lock()
	s.m[e] = struct{}{}
	s.mu.Unlock()
}

func (s *watchEnvSet) remove(e *watchEnv) {
	s.mu.Lock()
	delete(s.m, e)
	s.mu.Unlock()
}

func (s *watchEnvSet) sum(f func(*watchEnv) int64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for e := range s.m {
		n += f(e)
	}
	return float64(n)
}

var framesEncoded atomic.Uint64

// FramesEncoded returns how many event frames this process has encoded
// (each Envelope encodes at most once per distinct flags value).
func FramesEncoded() uint64 { return framesEncoded.Load() }

func countFrameEncoded() {
	framesEncoded.Add(1)
	framesEncodedMetric.Inc()
}

func countDrop(p QueuePolicy) {
	subQueueDropped.Inc()
	if p == DropOld {
		dropOldEmulated.Inc()
	}
}

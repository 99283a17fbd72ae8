package core

import (
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/internal/metricdoc"
)

// coreHelp is the HELP text of the core's metric families.
var coreHelp = map[string]string{
	"felix_group_deliveries_total":              "Records handed out by consumer group polls, redeliveries included.",
	"felix_group_redeliveries_total":            "Records handed out again by consumer group polls after a nack or a lapsed claim.",
	"felix_group_acks_total":                    "Consumer group acknowledgements that finished a record.",
	"felix_group_nacks_total":                   "Consumer group nacks that handed a record back.",
	"felix_group_dead_letters_total":            "Records listed as consumer group dead letters (past the attempt bound, or by a consumer).",
	"felix_group_stale_claims_total":            "Consumer group acks, nacks and extensions refused stale_claim.",
	"felix_group_dead_letters_dropped_total":    "Consumer group dead letters discarded because their group reached FELIX_GROUP_MAX_DEAD_LETTERS (the lowest offsets go; their records stay in the log).",
	"felix_groups_in_memory":                    "Consumer groups whose state this broker holds in memory; a group idle for FELIX_GROUP_IDLE_EVICT_MS with nothing in flight or owed is dropped and reloaded from its state file.",
	"felix_group_in_flight":                     "Consumer group claims standing and delayed nacks, over every group of the broker's shards.",
	"felix_sub_queue_dropped_total":             "Event batches dropped on the subscribe path because a subscriber queue was full, whatever the stream's policy.",
	"felix_sub_queue_drop_old_emulated_total":   "Drops on DropOld streams, which behave as DropNew.",
	"felix_subscribe_dropped_total":             "Subscriptions the broker ended (stream deleted or replaced, broker closed) rather than their owner.",
	"felix_event_frames_encoded_total":          "Event frames encoded for publish batches (each batch encodes at most once per distinct flags value).",
	"felix_cache_watches":                       "Cache watches open on this broker.",
	"felix_cache_watch_changes_delivered_total": "Cache values and changes handed to watchers.",
	"felix_cache_watch_lagged_total":            "Cache watches ended because they fell behind the change history.",
	"felix_cache_watch_history_bytes":           "Bytes held in the cache watch change history.",
	"felix_cache_watch_queued_bytes":            "Bytes of changes queued for cache watchers and not yet delivered.",
	"felix_cache_conditional_writes_total":      "Conditional cache writes (op put_if or delete_if) by outcome when their condition was decided: applied, refused (the condition did not hold), or error (refused by a bound or the log before or after the check).",
	"felix_counter_adds_total":                  "Counter adds appended to a counter log (refused adds, such as an overflow, are not counted).",
	"felix_cache_index_bytes":                   "Accounted memory of the key indexes of the open log-backed cache shards (88 bytes plus the key per live key).",
	"felix_shard_replicas_damaged":              "Replicated copies open on this broker that are marked damaged (short of what they promised, or set aside as corrupt) and not yet refilled by their leader.",
}

// coreMetrics are one broker core's metrics, kept in a set of its own
// (as raftmeta keeps one per member) so that several brokers can live in
// one process without sharing counters. NewBroker creates them and puts
// them in its Config copy, which every stream, shard, subscriber and
// watch environment holds: a hot path reaches a counter through two
// pointers, never a lookup.
type coreMetrics struct {
	set *metrics.Set

	// subQueueDropped counts every batch dropped on the subscribe path,
	// whatever the policy.
	subQueueDropped *metrics.Counter
	// dropOldEmulated counts the drops of DropOld streams, which behave as
	// DropNew.
	dropOldEmulated *metrics.Counter
	// subscribeDropped counts subscribers the broker ended (stream deleted
	// or replaced, broker closed), as opposed to closed by their owner.
	subscribeDropped *metrics.Counter
	// framesEncoded counts the event frames encoded for envelopes this
	// broker built (each encodes at most once per distinct flags value).
	framesEncoded *metrics.Counter

	// Cache watches: open watches, values and changes handed to their
	// owners, watches ended lagged. The history and queued byte gauges
	// read the watch environment when scraped (see addWatchEnv), so the
	// hot path keeps one atomic per change (the bound's) instead of two.
	cacheWatches        *metrics.Gauge
	cacheWatchDelivered *metrics.Counter
	cacheWatchLagged    *metrics.Counter

	// condWrites counts conditional writes by op and outcome
	// (felix_cache_conditional_writes_total); counterAdds the counter adds
	// appended.
	condWrites  condWriteMetrics
	counterAdds *metrics.Counter

	// Consumer groups (group.go).
	groupDeliveries, groupRedeliveries, groupAcks, groupNacks *metrics.Counter
	groupDeadLetters, groupStaleClaims                        *metrics.Counter
	groupDeadLettersDropped                                   *metrics.Counter

	durable durableMetrics
	// producers are the idempotent-producer tables' metrics.
	producers producerMetrics
	// commitState are the atomic-commit state's metrics.
	commitState commitStateMetrics
	// groups sums the claims of the open consumer groups at scrape time
	// (felix_group_in_flight).
	groups groupsMetrics
	// cacheIndex sums the index memory of the open log-backed cache
	// shards at scrape time.
	cacheIndex cacheIndexMetrics
	// replicasDamaged counts the open replicated copies marked damaged
	// and not yet refilled (felix_shard_replicas_damaged): one up when a
	// copy opens damaged, one down when it is refilled or closed damaged.
	replicasDamaged atomic.Int64
}

// cacheIndexMetrics tracks the open cache stores for
// felix_cache_index_bytes.
type cacheIndexMetrics struct {
	mu     sync.Mutex
	stores map[*CacheStore]struct{} // guarded by mu
}

func (c *cacheIndexMetrics) register(s *metrics.Set) {
	c.stores = map[*CacheStore]struct{}{}
	s.NewGauge("felix_cache_index_bytes", func() float64 {
		c.mu.Lock()
		stores := make([]*CacheStore, 0, len(c.stores))
		for st := range c.stores {
			stores = append(stores, st)
		}
		c.mu.Unlock()
		var total int64
		for _, st := range stores {
			used, _ := st.IndexBytes()
			total += used
		}
		return float64(total)
	})
}

func (c *cacheIndexMetrics) add(s *CacheStore) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stores[s] = struct{}{}
}

func (c *cacheIndexMetrics) remove(s *CacheStore) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.stores, s)
}

func newCoreMetrics() *coreMetrics {
	metricdoc.Describe(coreHelp)
	metricdoc.Describe(durableHelp)
	metricdoc.Describe(producerHelp)
	metricdoc.Describe(commitStateHelp)
	s := metrics.NewSet()
	m := &coreMetrics{
		set:                 s,
		subQueueDropped:     s.NewCounter("felix_sub_queue_dropped_total"),
		dropOldEmulated:     s.NewCounter("felix_sub_queue_drop_old_emulated_total"),
		subscribeDropped:    s.NewCounter("felix_subscribe_dropped_total"),
		framesEncoded:       s.NewCounter("felix_event_frames_encoded_total"),
		cacheWatches:        s.NewGauge("felix_cache_watches", nil),
		cacheWatchDelivered: s.NewCounter("felix_cache_watch_changes_delivered_total"),
		cacheWatchLagged:    s.NewCounter("felix_cache_watch_lagged_total"),
	}
	m.condWrites.register(s)
	m.counterAdds = s.NewCounter("felix_counter_adds_total")
	m.groupDeliveries = s.NewCounter("felix_group_deliveries_total")
	m.groupRedeliveries = s.NewCounter("felix_group_redeliveries_total")
	m.groupAcks = s.NewCounter("felix_group_acks_total")
	m.groupNacks = s.NewCounter("felix_group_nacks_total")
	m.groupDeadLetters = s.NewCounter("felix_group_dead_letters_total")
	m.groupStaleClaims = s.NewCounter("felix_group_stale_claims_total")
	m.groupDeadLettersDropped = s.NewCounter("felix_group_dead_letters_dropped_total")
	m.durable.register(s)
	m.producers.register(s)
	m.commitState.register(s)
	m.cacheIndex.register(s)
	m.groups.register(s)
	s.NewGauge("felix_shard_replicas_damaged", func() float64 { return float64(m.replicasDamaged.Load()) })
	return m
}

// condOutcome is how a conditional write ended, for its metric.
type condOutcome int

const (
	condApplied condOutcome = iota
	condRefused
	condError
	condOutcomes
)

// condWriteMetrics are felix_cache_conditional_writes_total{op,outcome}:
// index 0 is put_if, 1 delete_if.
type condWriteMetrics [2][condOutcomes]*metrics.Counter

func (c *condWriteMetrics) register(s *metrics.Set) {
	for i, op := range []string{"put_if", "delete_if"} {
		for o, outcome := range []string{"applied", "refused", "error"} {
			c[i][o] = s.NewCounter(`felix_cache_conditional_writes_total{op="` + op + `",outcome="` + outcome + `"}`)
		}
	}
}

// count counts one conditional write (deleteIf says which op).
func (c *condWriteMetrics) count(deleteIf bool, r CondResult, err error) {
	op, o := 0, condApplied
	if deleteIf {
		op = 1
	}
	switch {
	case err != nil:
		o = condError
	case !r.Applied:
		o = condRefused
	}
	c[op][o].Inc()
}

// addWatchEnv exposes the byte counters of the broker's watch
// environment.
func (m *coreMetrics) addWatchEnv(e *watchEnv) {
	m.set.NewGauge("felix_cache_watch_history_bytes", func() float64 { return float64(e.historyUsed.Load()) })
	m.set.NewGauge("felix_cache_watch_queued_bytes", func() float64 { return float64(e.total.Load()) })
}

// Metrics returns the broker's own metric set (Prometheus names felix_*,
// as the spec lists them). It is not registered globally: whoever
// exposes the broker writes it (Set.WritePrometheus) next to the
// process-wide metrics.
func (b *Broker) Metrics() *metrics.Set { return b.cfg.metrics.set }

// metrics returns the metrics of the shard's broker.
func (sh *Shard) metrics() *coreMetrics { return sh.stream.cfg.metrics }

// metrics returns the metrics of the watch's broker.
func (w *CacheWatch) metrics() *coreMetrics { return w.c.log.env.metrics }

func (m *coreMetrics) countDrop(p QueuePolicy) {
	m.subQueueDropped.Inc()
	if p == DropOld {
		m.dropOldEmulated.Inc()
	}
}

package core

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// Idempotent producers. Each shard keeps a table of the producers that
// published to it under a sequence: for each, the next sequence it
// expects and the last wire.ProducerWindow batches with where they landed
// and their digest. A claim checks the table and appends under the lock
// that orders the shard's claims (claimMu on a durable shard, the commit
// turn on an in-memory one), so the check, the append and the table's
// update are one step against every other publish to the shard.
//
// A producer the table does not hold may start at sequence 0 (that is
// how a producer id from producer_init becomes known to each shard's
// owner, wherever it runs); any other sequence from it is refused as
// unknown_producer. The table holds at most Config.ProducersPerShard
// producers; taking a new one past that forgets the least recently used,
// whose next batch is then refused as unknown_producer.
//
// On a durable shard the first record of each batch carries the producer
// block (id, sequence, count, digest: log layout version 2), and opening
// the shard rebuilds the table from the last Config.ProducerScanRecords
// records of the log, so a re-send after a restart is still answered once.
// A new leader opens the shard over its copy once the takeover made the
// copy final, so the same rebuild covers what it copied as a follower and
// fetched from the furthest copy. A duplicate of a rebuilt batch is
// answered on a replicated shard only once a majority holds it and the
// new leadership's generation start (Claimed.CommitEnd).

// Defaults for the producer table.
const (
	DefaultProducersPerShard   = 1024
	DefaultProducerScanRecords = 1 << 18
)

// producerHelp is the HELP text of the idempotent-producer metrics.
var producerHelp = map[string]string{
	"felix_idempotent_producers":               "Idempotent producers held in the shards' producer tables on this broker.",
	"felix_idempotent_producers_evicted_total": "Idempotent producers forgotten because a shard's producer table was full (their next batch is refused unknown_producer).",
	"felix_idempotent_duplicates_total":        "Idempotent batches re-sent under a sequence the shard held, answered from memory and not appended.",
	"felix_idempotent_refused_total":           "Idempotent batches refused, by reason (sequence_gap, unknown_producer, sequence_expired, sequence_reused).",
}

// producerMetrics are the broker's idempotent-producer metrics.
type producerMetrics struct {
	held       atomic.Int64
	evicted    *metrics.Counter
	duplicates *metrics.Counter
	refused    map[string]*metrics.Counter
}

func (p *producerMetrics) register(s *metrics.Set) {
	s.NewGauge("felix_idempotent_producers", func() float64 { return float64(p.held.Load()) })
	p.evicted = s.NewCounter("felix_idempotent_producers_evicted_total")
	p.duplicates = s.NewCounter("felix_idempotent_duplicates_total")
	p.refused = map[string]*metrics.Counter{}
	for _, r := range []string{wire.ReasonSequenceGap, wire.ReasonUnknownProducer, wire.ReasonSequenceExpired, wire.ReasonSequenceReused} {
		p.refused[r] = s.NewCounter(`felix_idempotent_refused_total{reason="` + r + `"}`)
	}
}

// producerBatch is one remembered batch of a producer.
type producerBatch struct {
	seq    uint64
	base   uint64
	count  uint32
	digest uint64
	// outcome is the durable claim's, which a re-send waits for (nil once
	// rebuilt from the log, and on in-memory shards, whose batches are
	// complete when recorded).
	outcome *claimOutcome
}

// producerState is what a shard holds of one producer.
type producerState struct {
	id   uint64
	next uint64 // the sequence it takes next
	held int    // how many of the sequences below next are in recent
	// recent holds sequence s at s % ProducerWindow, for s in
	// [next-held, next).
	recent [wire.ProducerWindow]producerBatch
	elem   *list.Element
}

// producerTable is a shard's producers, least recently used first in lru.
type producerTable struct {
	mu    sync.Mutex
	limit int
	m     map[uint64]*producerState
	lru   list.List
	met   *producerMetrics
}

func newProducerTable(limit int, met *producerMetrics) *producerTable {
	return &producerTable{limit: max(1, limit), m: map[uint64]*producerState{}, met: met}
}

// check decides what to do with batch seq of producer id: append it (nil,
// nil), answer it as a re-send of a held batch (the batch, nil), or refuse
// it. The caller holds the shard's claim lock.
func (t *producerTable) check(id, seq uint64, count uint32, digest uint64) (*producerBatch, *wire.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.m[id]
	if st == nil {
		if seq == 0 {
			return nil, nil
		}
		return nil, t.refuse(wire.ReasonUnknownProducer, 0)
	}
	t.lru.MoveToBack(st.elem)
	switch {
	case seq == st.next:
		return nil, nil
	case seq > st.next:
		return nil, t.refuse(wire.ReasonSequenceGap, st.next)
	case st.next-seq > uint64(st.held):
		return nil, t.refuse(wire.ReasonSequenceExpired, 0)
	}
	b := &st.recent[seq%wire.ProducerWindow]
	if b.seq != seq || b.count != count || b.digest != digest {
		return nil, t.refuse(wire.ReasonSequenceReused, 0)
	}
	t.met.duplicates.Inc()
	cp := *b
	return &cp, nil
}

func (t *producerTable) refuse(reason string, expected uint64) *wire.Error {
	t.met.refused[reason].Inc()
	return wire.ProducerRefusal{Reason: reason, Expected: &expected}.Err()
}

// record notes batch b of producer id as appended: it becomes the
// producer's latest, and the producer is taken into the table if new
// (forgetting the least recently used one past the limit). A sequence that
// does not follow the producer's latest (only while rebuilding from a log
// that lost some) starts its memory afresh.
func (t *producerTable) record(id uint64, b producerBatch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.m[id]
	if st == nil {
		for len(t.m) >= t.limit {
			old := t.lru.Front()
			delete(t.m, old.Value.(*producerState).id)
			t.lru.Remove(old)
			t.met.held.Add(-1)
			t.met.evicted.Inc()
		}
		st = &producerState{id: id}
		st.elem = t.lru.PushBack(st)
		t.m[id] = st
		t.met.held.Add(1)
	} else {
		t.lru.MoveToBack(st.elem)
	}
	if b.seq != st.next || st.held == 0 {
		st.held = 0
	}
	st.recent[b.seq%wire.ProducerWindow] = b
	st.next = b.seq + 1
	st.held = min(st.held+1, wire.ProducerWindow)
}

// forget drops every producer (the shard is closing).
func (t *producerTable) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.met.held.Add(-int64(len(t.m)))
	t.m = map[uint64]*producerState{}
	t.lru.Init()
}

// producerTable returns the shard's producer table, made on first use.
func (sh *Shard) producerTable() *producerTable {
	if p := sh.producers.Load(); p != nil {
		return p
	}
	p := newProducerTable(sh.stream.cfg.ProducersPerShard, &sh.metrics().producers)
	if !sh.producers.CompareAndSwap(nil, p) {
		return sh.producers.Load()
	}
	return p
}

// ProducerCount returns how many producers the shard's table holds.
func (sh *Shard) ProducerCount() int {
	p := sh.producers.Load()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// ClaimIdempotent is Claim for batch seq of producer id on a durable
// shard. A batch the table holds under seq with the same records is not
// written again: the claim returned is a duplicate, whose BaseOffset is
// where the first copy landed and whose Finish waits for that copy. A
// refusal (a *wire.Error with a producer reason, see
// wire.NewProducerRefusal) writes nothing and takes no offset. The
// other refusals are Claim's.
func (sh *Shard) ClaimIdempotent(payloads [][]byte, publisher string, id, seq uint64) (*Claimed, error) {
	// The digest reads only the payloads: computed before the claim lock,
	// it does not hold up the shard's other claims.
	digest := wire.BatchDigest(payloads)
	sh.claimMu.Lock()
	defer sh.claimMu.Unlock()
	if err := sh.claimableLocked(payloads, nil); err != nil {
		return nil, err
	}
	t := sh.producerTable()
	dup, e := t.check(id, seq, uint32(len(payloads)), digest)
	if e != nil {
		return nil, e.WithDetail("shard", sh.index)
	}
	if dup != nil {
		c := &Claimed{sh: sh, dup: true, dupBase: dup.base, dupOf: dup.outcome}
		if dup.outcome == nil {
			c.dupEnd = max(dup.base+uint64(dup.count), sh.readHold)
		}
		return c, nil
	}
	c, err := sh.appendClaimLocked(payloads, publisher, &flog.Producer{ID: id, Sequence: seq, Digest: digest}, nil)
	if err != nil {
		return nil, err
	}
	c.outcome = &claimOutcome{done: make(chan struct{})}
	t.record(id, producerBatch{seq: seq, base: c.env.BaseOffset, count: uint32(len(payloads)), digest: digest, outcome: c.outcome})
	return c, nil
}

// PublishIdempotent is Publish for batch seq of producer id: it checks
// the shard's producer table and publishes under the same lock, returning
// the batch's first offset, or the first copy's for a re-send of a held
// batch (not published again). Refusals are ClaimIdempotent's.
func (sh *Shard) PublishIdempotent(ctx context.Context, payloads [][]byte, publisher string, id, seq uint64) (uint64, error) {
	off, _, err := sh.PublishIdempotentReport(ctx, payloads, publisher, id, seq)
	return off, err
}

// PublishIdempotentReport is PublishIdempotent also reporting whether the
// batch was a re-send answered from the table (duplicate) rather than
// published.
func (sh *Shard) PublishIdempotentReport(ctx context.Context, payloads [][]byte, publisher string, id, seq uint64) (offset uint64, duplicate bool, err error) {
	if len(payloads) == 0 {
		return 0, false, errEmptyBatch()
	}
	if sh.Durable() {
		c, err := sh.ClaimIdempotent(payloads, publisher, id, seq)
		if err != nil {
			return 0, false, err
		}
		return c.BaseOffset(), c.Duplicate(), c.finish(context.WithoutCancel(ctx), ctx)
	}
	digest := wire.BatchDigest(payloads) // before the turn, as in ClaimIdempotent
	if err := sh.acquireTurn(ctx); err != nil {
		return 0, false, err
	}
	defer sh.releaseTurn()
	if sh.closed.Load() {
		return 0, false, sh.errClosed()
	}
	t := sh.producerTable()
	dup, e := t.check(id, seq, uint32(len(payloads)), digest)
	if e != nil {
		return 0, false, e.WithDetail("shard", sh.index)
	}
	if dup != nil {
		return dup.base, true, nil
	}
	env, err := sh.claim(payloads, publisher)
	if err != nil {
		return 0, false, err
	}
	t.record(id, producerBatch{seq: seq, base: env.BaseOffset, count: uint32(len(payloads)), digest: digest})
	return env.BaseOffset, false, sh.complete(ctx, env)
}

// rebuildProducers fills the producer table from the records carrying a
// producer block among the last scan records of the shard's log. It runs
// before the shard is visible. A failed read leaves the table with what
// was read: producers it misses answer unknown_producer, never a false
// duplicate.
func (sh *Shard) rebuildProducers(scan int) {
	lg := sh.log
	next := lg.NextOffset()
	from := lg.StartOffset()
	if scan > 0 && next-from > uint64(scan) {
		from = next - uint64(scan)
	}
	for from < next {
		recs, n, err := lg.Read(from, next, 4096, 4<<20)
		if err != nil || n <= from {
			return
		}
		for _, r := range recs {
			if r.Producer == nil || r.Kind != flog.KindData {
				continue
			}
			p := r.Producer
			sh.producerTable().record(p.ID, producerBatch{seq: p.Sequence, base: r.Offset, count: p.Count, digest: p.Digest})
		}
		from = n
	}
}

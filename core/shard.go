package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// Shard is one ordered partition of a stream: it assigns offsets, keeps
// the replay ring and fans batches out to its subscribers.
//
// Publish and Subscribe serialize on the commit turn (a one-slot channel,
// so waiting for it honours a context). The subscriber registry has its own
// mutex, taken only by subscribe, unsubscribe and close; publishers read
// the registry through an atomically swapped immutable snapshot.
type Shard struct {
	stream *Stream
	index  uint32
	// generation is the generation of this broker's ownership of the
	// shard (0 standalone).
	generation atomic.Uint64

	// turnC is the commit turn: holding its single slot grants exclusive
	// use of next and ring.
	turnC chan struct{}
	// next is the offset the next record gets. Guarded by turnC.
	// Invariant: next == ring's last EndOffset when the ring is non-empty;
	// next only grows.
	next uint64
	// nextPub mirrors next for lock-free readers.
	nextPub atomic.Uint64
	// ring holds recent batches. Guarded by turnC.
	ring replayRing
	// claimMu serializes claims on a durable shard, so the log's offsets
	// and the chain of claims agree.
	claimMu sync.Mutex
	// lastClaim is the newest claim, which the next claim waits on
	// before it finishes. Guarded by claimMu.
	lastClaim *Claimed
	// producers is the idempotent-producer table (producer.go), made on
	// first use.
	producers atomic.Pointer[producerTable]
	// commits is the atomic-commit state (commit_state.go), made on
	// first use; applied under claimMu.
	commits atomic.Pointer[commitState]
	// groups are the shard's consumer groups (group.go), opened on first
	// use under groupsMu; nil until then.
	groups   atomic.Pointer[Groups]
	groupsMu sync.Mutex
	// log is the shard's segment log on a durable stream (nil otherwise,
	// and nil when recovery refused it). Set before the shard is visible.
	log *flog.Log
	// repl is what the shard's leader consults about its followers
	// (Config.ReplicationFor; nil when nobody copies the log). Set
	// before the shard is visible.
	repl Replication
	// readHold, when set, is one past a new leader's generation start:
	// reads are refused until repl's committed mark reaches it. Set
	// before the shard is visible.
	readHold uint64
	// holdSkipped is how many offsets just before readHold hold no event:
	// its generation start and the ones an earlier leader left with no
	// event after them (failovers in a row). The first batch at readHold
	// carries it as SkippedBefore. Set with readHold.
	holdSkipped uint64
	// unavailable is why a durable shard's log did not open; set before
	// the shard is visible, never changed after.
	unavailable error

	// closed is set once, under subsMu, when the stream goes away or
	// the shard closes here; closeCause, stored first, is why.
	closed     atomic.Bool
	closeCause atomic.Pointer[error]
	// subsMu guards subs, gone and the writes of snapshot.
	subsMu sync.Mutex
	// subs are the registered subscribers in registration order, and
	// (gone of them) subscribers that left since the last compaction.
	// subs only grows by append and a compaction builds a new array, so
	// the prefix a snapshot holds never changes under a publisher, and
	// neither registering nor leaving copies the registry.
	// Invariant: snapshot holds subs[:len(subs)].
	subs     []*Subscriber
	gone     int
	live     atomic.Int64
	snapshot atomic.Pointer[[]*Subscriber]
}

func newShard(st *Stream, index uint32) *Shard {
	cfg := st.cfg
	sh := &Shard{
		stream: st,
		index:  index,
		turnC:  make(chan struct{}, 1),
		ring:   newReplayRing(cfg.ReplayRingMaxBatches, cfg.ReplayRingMaxBytes),
	}
	sh.snapshot.Store(&[]*Subscriber{})
	return sh
}

// Index returns the shard's number within its stream.
func (sh *Shard) Index() uint32 { return sh.index }

// Stream returns the stream the shard belongs to.
func (sh *Shard) Stream() *Stream { return sh.stream }

// Generation returns the generation of this broker's ownership of the
// shard (0 standalone).
func (sh *Shard) Generation() uint64 { return sh.generation.Load() }

// NextOffset returns the offset the next published record will get.
func (sh *Shard) NextOffset() uint64 { return sh.nextPub.Load() }

// Subscribers returns how many subscribers are registered.
func (sh *Shard) Subscribers() int { return int(sh.live.Load()) }

func (sh *Shard) acquireTurn(ctx context.Context) error {
	select {
	case sh.turnC <- struct{}{}:
		return nil
	default:
	}
	select {
	case sh.turnC <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (sh *Shard) releaseTurn() { <-sh.turnC }

// Publish claims offsets for payloads, appends the batch to the replay
// ring and enqueues one shared Envelope to every subscriber, all under the
// shard's commit turn, so batches reach every subscriber in offset order.
// It returns the batch's first offset. payloads are retained: the caller
// must not reuse them.
//
// Under DropNew and DropOld a full subscriber loses the batch (counted).
// Under Block the batch first goes to every subscriber with room, then
// Publish waits on the full ones in registration order. If ctx ends while
// waiting for the commit turn, nothing was published and ctx.Err() is
// returned. If it ends during a Block wait, the batch stays published
// (offsets taken, in the ring, delivered where there was room), the
// subscribers still full count it as dropped, and the error is a
// *wire.Error overloaded with retry class outcome_unknown alongside the
// valid offset.
func (sh *Shard) Publish(ctx context.Context, payloads [][]byte, publisher string) (uint64, error) {
	if len(payloads) == 0 {
		return 0, errEmptyBatch()
	}
	if sh.Durable() {
		return sh.publishDurable(ctx, payloads, publisher)
	}
	if err := sh.acquireTurn(ctx); err != nil {
		return 0, err
	}
	defer sh.releaseTurn()
	e, err := sh.claim(payloads, publisher)
	if err != nil {
		return 0, err
	}
	return e.BaseOffset, sh.complete(ctx, e)
}

// claim is the ordered half of a publish: it checks the shard is live and
// takes the batch's offsets. A durable log appends here. Caller holds the
// commit turn.
func (sh *Shard) claim(payloads [][]byte, publisher string) (*Envelope, error) {
	if sh.closed.Load() {
		return nil, sh.errClosed()
	}
	base := sh.next
	sh.next += uint64(len(payloads))
	sh.nextPub.Store(sh.next)
	return sh.envelope(payloads, base, publisher, time.Now()), nil
}

// complete appends a claimed batch to the ring and fans it out. Caller
// holds the commit turn, so completions happen in claim order.
func (sh *Shard) complete(ctx context.Context, e *Envelope) error {
	sh.ring.push(e)
	return sh.fanout(ctx, e)
}

// advance moves the completed tail to next. Caller holds the commit turn.
func (sh *Shard) advance(next uint64) {
	sh.next = next
	sh.nextPub.Store(next)
	if g := sh.groups.Load(); g != nil {
		g.notify()
	}
}

func (sh *Shard) fanout(ctx context.Context, e *Envelope) error {
	policy := sh.stream.Policy()
	subs := *sh.snapshot.Load()
	var waiting []*Subscriber
	for _, s := range subs {
		if s.q.tryPush(e) != full {
			continue
		}
		if policy == Block {
			waiting = append(waiting, s)
			continue
		}
		if s.endOnLag {
			s.lag(e.BaseOffset)
		}
		s.countDrop(policy)
	}
	return sh.waitForRoom(ctx, e, waiting)
}

// waitForRoom enqueues e to each full subscriber in order, waiting for
// room; once ctx ends, the rest lose the batch.
func (sh *Shard) waitForRoom(ctx context.Context, e *Envelope, waiting []*Subscriber) error {
	var err error
	dropped := 0
	for _, s := range waiting {
		if err == nil {
			if _, err = s.q.pushWait(ctx, e); err == nil {
				continue
			}
		}
		if s.q.tryPush(e) == full {
			s.countDrop(Block)
			dropped++
		}
	}
	if err == nil {
		return nil
	}
	werr := wire.NewError(wire.CodeOverloaded, "subscriber queues stayed full until the publish gave up waiting: %v", err)
	werr.Retry = wire.RetryOutcomeUnknown
	return werr.WithDetail("reason", "block_wait_ended").
		WithDetail("offset", e.BaseOffset).
		WithDetail("dropped_for", dropped)
}

package felix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/felixmq/felix/wire"
)

// Bounds of a ShardedGroup.
const (
	// shardPollGrace is how long past its wait a shard's poll may go
	// unanswered before it is given up (its owner frozen, say); the
	// shard is then polled again after a backoff.
	shardPollGrace = 5 * time.Second
	// mergedPollGrace is how long past its wait Poll waits for shards
	// still unanswered before it returns what it has (nothing).
	mergedPollGrace = time.Second
	// closeWait is how long Close waits for the polls still out to
	// answer (and what they claimed to be handed back) before it
	// abandons them.
	closeWait = 2 * time.Second
)

// ShardedGroup is one consumer group over every shard of a durable
// stream, merged on the client (the broker serves one shard's group at a
// time). Poll claims records from all the shards; each record carries
// its Shard, and Ack, Nack, Extend and DeadLetter go to that shard's
// owner.
//
// Each shard has at most one poll out at a time, and a shard is polled
// again only once Poll has handed out everything its last poll claimed:
// the records held between polls are at most one poll's worth per shard,
// and their visibility runs while they are held. Polls run concurrently,
// one per shard, so a busy shard never keeps a quiet one waiting, and
// Poll takes one record from each shard in turn, starting one shard later
// on each call. A shard whose poll fails for a reason a retry may cure
// (its owner moved and is not known yet, its owner is down, its
// connection was lost) is polled again after a backoff (50 ms doubling to
// 1 s) while the others carry on; a refusal for good (permissions, no
// such stream) is returned by the next Poll. A poll lost in flight, or
// abandoned by Close, may hold claims: those records come round again
// once their visibility lapses.
//
// Ordering holds within a shard only. Poll, Ack, Nack, Extend, DeadLetter
// and Consume are safe from any goroutine.
type ShardedGroup struct {
	calls     groupCalls
	namespace string
	stream    string
	name      string

	// ctx ends at Close, cancelling the polls still out.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the shards' polls

	mu sync.Mutex
	// lanes holds one entry per shard, in shard order. Guarded by mu.
	lanes []shardLane
	// first is the shard the next Poll takes its first record from.
	// Guarded by mu.
	first int
	// changed is closed, and replaced, when a shard's poll ends.
	// Guarded by mu.
	changed chan struct{}
	closed  bool // Guarded by mu.
}

// shardLane is what a ShardedGroup knows of one shard.
type shardLane struct {
	// ready is what the last poll claimed and Poll has not handed out.
	// Invariant: ready is empty while polling.
	ready   []GroupRecord
	polling bool // a poll is out (at most one)
	// retryAt is when a shard whose poll failed may be polled again
	// (zero: at once); backoff is the delay after the next failure.
	retryAt time.Time
	backoff time.Duration
	// err is a refusal for good the next Poll returns.
	err error
}

// GroupSharded returns group over every shard of stream (the width
// stream_shards reports; one on a broker that does not serve it), each
// shard's calls on its owner. Close it when done.
func (cc *ClusterClient) GroupSharded(ctx context.Context, namespace, stream, group string) (*ShardedGroup, error) {
	n, err := cc.streamShardCount(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return newShardedGroup(cc, n, namespace, stream, group), nil
}

// GroupSharded returns group over every shard of stream on this broker,
// for a broker that leads every shard (felix serve); see
// ClusterClient.GroupSharded.
func (c *Client) GroupSharded(ctx context.Context, namespace, stream, group string) (*ShardedGroup, error) {
	n, err := c.streamWidth(ctx, namespace, stream)
	if err != nil {
		return nil, err
	}
	return newShardedGroup(c, n, namespace, stream, group), nil
}

func newShardedGroup(calls groupCalls, n uint32, namespace, stream, group string) *ShardedGroup {
	ctx, cancel := context.WithCancel(context.Background())
	return &ShardedGroup{calls: calls, namespace: namespace, stream: stream, name: group, ctx: ctx, cancel: cancel,
		lanes: make([]shardLane, n), changed: make(chan struct{})}
}

// Shards returns how many shards the group reads.
func (sg *ShardedGroup) Shards() int { return len(sg.lanes) }

// Poll claims up to maxRecords records from the stream's shards, waiting
// up to opts.Wait for work: it returns as soon as any shard has records
// (without a wait, once every shard polled has answered), or with none
// once every shard polled answered empty (or opts.Wait and a second's
// grace passed). No records is not an error.
func (sg *ShardedGroup) Poll(ctx context.Context, maxRecords int, opts GroupPollOptions) ([]GroupRecord, error) {
	if maxRecords <= 0 {
		return nil, notSent(invalidArg("group_poll: max must be at least 1"))
	}
	opts.Wait = max0(opts.Wait)
	waitEnd := time.Now().Add(opts.Wait)
	deadline := waitEnd.Add(mergedPollGrace)
	t := time.NewTimer(opts.Wait + mergedPollGrace)
	defer t.Stop()
	for {
		sg.mu.Lock()
		if sg.closed {
			sg.mu.Unlock()
			return nil, ErrClosed
		}
		now := time.Now()
		if now.Before(deadline) {
			sg.startPollsLocked(now, maxRecords, opts, waitEnd)
		}
		wake, busy := sg.nextWakeLocked(deadline)
		// Without a wait, every shard's answer is waited for: a poll
		// left out when Poll returns holds its claims until the next.
		if opts.Wait > 0 || !sg.pollingLocked() || !now.Before(deadline) {
			if recs := sg.takeLocked(maxRecords); len(recs) > 0 {
				sg.mu.Unlock()
				return recs, nil
			}
		}
		if err := sg.takeErrLocked(); err != nil {
			sg.mu.Unlock()
			return nil, err
		}
		ch := sg.changed
		sg.mu.Unlock()
		if !busy || !now.Before(deadline) {
			return nil, nil
		}
		var retryC <-chan time.Time
		var rt *time.Timer
		if !wake.IsZero() {
			rt = time.NewTimer(time.Until(wake))
			retryC = rt.C
		}
		select {
		case <-ch:
		case <-retryC:
		case <-t.C:
			deadline = time.Now() // one last look, then return
		case <-ctx.Done():
		}
		if rt != nil {
			rt.Stop()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// startPollsLocked sends a poll to every shard with none out, nothing
// held and no backoff running, waiting until waitEnd. Caller holds mu.
func (sg *ShardedGroup) startPollsLocked(now time.Time, maxRecords int, opts GroupPollOptions, waitEnd time.Time) {
	opts.Wait = max0(waitEnd.Sub(now))
	for i := range sg.lanes {
		l := &sg.lanes[i]
		if l.polling || len(l.ready) > 0 || l.err != nil || now.Before(l.retryAt) {
			continue
		}
		l.polling = true
		sg.wg.Add(1)
		go sg.pollShard(uint32(i), maxRecords, opts)
	}
}

// nextWakeLocked reports whether a shard may yet answer before deadline
// (a poll out, or a backoff ending before it), and the earliest such
// backoff's end (zero: none). Caller holds mu.
func (sg *ShardedGroup) nextWakeLocked(deadline time.Time) (wake time.Time, busy bool) {
	for i := range sg.lanes {
		l := &sg.lanes[i]
		switch {
		case l.polling:
			busy = true
		case len(l.ready) == 0 && l.err == nil && l.retryAt.Before(deadline):
			busy = true
			if wake.IsZero() || l.retryAt.Before(wake) {
				wake = l.retryAt
			}
		}
	}
	return wake, busy
}

// pollingLocked reports whether some shard has a poll out. Caller holds
// mu.
func (sg *ShardedGroup) pollingLocked() bool {
	for i := range sg.lanes {
		if sg.lanes[i].polling {
			return true
		}
	}
	return false
}

// takeLocked hands out up to maxRecords held records, one from each shard
// in turn, starting one shard later than the last call. Caller holds mu.
func (sg *ShardedGroup) takeLocked(maxRecords int) []GroupRecord {
	n := len(sg.lanes)
	var out []GroupRecord
	for took := true; took && len(out) < maxRecords; {
		took = false
		for i := 0; i < n && len(out) < maxRecords; i++ {
			l := &sg.lanes[(sg.first+i)%n]
			if len(l.ready) == 0 {
				continue
			}
			out = append(out, l.ready[0])
			l.ready = l.ready[1:]
			if len(l.ready) == 0 {
				l.ready = nil
			}
			took = true
		}
	}
	if len(out) > 0 {
		sg.first = (sg.first + 1) % n
	}
	return out
}

// takeErrLocked returns, and clears, a shard's refusal for good; the
// shard is polled again after a backoff. Caller holds mu.
func (sg *ShardedGroup) takeErrLocked() error {
	for i := range sg.lanes {
		if err := sg.lanes[i].err; err != nil {
			sg.lanes[i].err = nil
			return err
		}
	}
	return nil
}

// pollShard runs one poll of shard and files its answer.
func (sg *ShardedGroup) pollShard(shard uint32, maxRecords int, opts GroupPollOptions) {
	defer sg.wg.Done()
	ctx, cancel := context.WithTimeout(sg.ctx, opts.Wait+shardPollGrace)
	recs, err := sg.calls.GroupPoll(ctx, sg.namespace, sg.stream, shard, sg.name, maxRecords, opts)
	cancel()
	sg.mu.Lock()
	defer sg.mu.Unlock()
	l := &sg.lanes[shard]
	l.polling = false
	switch {
	case err == nil:
		for i := range recs {
			recs[i].Shard = shard
		}
		l.ready, l.backoff, l.retryAt = recs, 0, time.Time{}
	case sg.ctx.Err() != nil: // closed
	default:
		l.backoff = min(max(2*l.backoff, resumeBackoffBase), resumeBackoffMax)
		l.retryAt = time.Now().Add(l.backoff)
		if pollRefusedForGood(err) {
			l.err = fmt.Errorf("felix: group poll of shard %d: %w", shard, err)
		}
	}
	close(sg.changed)
	sg.changed = make(chan struct{})
}

// pollRefusedForGood reports a poll failure a retry will not cure: a
// closed client, or a broker's refusal other than one that says the shard
// is led elsewhere or a retry may work.
func pollRefusedForGood(err error) bool {
	if errors.Is(err, ErrClosed) {
		return true
	}
	if redirectable(err) {
		return false
	}
	var be *BrokerError
	return errors.As(err, &be) && !be.Retry.Retryable()
}

// shardOf checks rec's shard is one of the group's.
func (sg *ShardedGroup) shardOf(rec GroupRecord) error {
	if int(rec.Shard) >= len(sg.lanes) {
		return notSent(invalidArg("group: record of shard %d, the stream has %d", rec.Shard, len(sg.lanes)))
	}
	return nil
}

// Ack finishes rec on its shard (GroupAck).
func (sg *ShardedGroup) Ack(ctx context.Context, rec GroupRecord) error {
	if err := sg.shardOf(rec); err != nil {
		return err
	}
	return sg.calls.GroupAck(ctx, sg.namespace, sg.stream, rec.Shard, sg.name, rec.Offset)
}

// Nack hands rec back on its shard, redelivered after delay (GroupNack).
func (sg *ShardedGroup) Nack(ctx context.Context, rec GroupRecord, delay time.Duration) error {
	if err := sg.shardOf(rec); err != nil {
		return err
	}
	return sg.calls.GroupNack(ctx, sg.namespace, sg.stream, rec.Shard, sg.name, rec, delay)
}

// Extend keeps the claim on rec standing for extend (GroupExtend).
func (sg *ShardedGroup) Extend(ctx context.Context, rec GroupRecord, extend time.Duration) (time.Duration, error) {
	if err := sg.shardOf(rec); err != nil {
		return 0, err
	}
	return sg.calls.GroupExtend(ctx, sg.namespace, sg.stream, rec.Shard, sg.name, rec, extend)
}

// DeadLetter lists rec as a dead letter of its shard and finishes it
// (GroupDeadLetter).
func (sg *ShardedGroup) DeadLetter(ctx context.Context, rec GroupRecord) error {
	if err := sg.shardOf(rec); err != nil {
		return err
	}
	return sg.calls.GroupDeadLetter(ctx, sg.namespace, sg.stream, rec.Shard, sg.name, rec.Offset)
}

// Consume is Group.Consume over every shard: it polls, calls handler for
// each record in the order Poll returned them, acks on nil and nacks on an
// error. An ack or nack refused stale_claim, or failed for a reason a
// retry may cure (the shard's owner down or moving), is skipped: the
// record comes round again. It returns nil once ctx ends, or the first
// other error.
func (sg *ShardedGroup) Consume(ctx context.Context, handler func(context.Context, GroupRecord) error, opts ConsumeOptions) error {
	return consume(ctx, sg.Poll, sg.Ack, sg.Nack, handler, opts, func(err error) bool {
		return staleClaim(err) || !pollRefusedForGood(err)
	})
}

// Close stops polling: it waits up to two seconds for the polls still
// out to answer, abandons any still out then (what they claim comes round
// once its visibility lapses), and nacks the records held and not yet
// handed out, so they are delivered again at once. It
// returns the first nack's error; Poll returns ErrClosed afterwards.
func (sg *ShardedGroup) Close() error {
	sg.mu.Lock()
	if sg.closed {
		sg.mu.Unlock()
		return nil
	}
	sg.closed = true
	sg.mu.Unlock()
	done := make(chan struct{})
	go func() {
		sg.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(closeWait)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	sg.cancel()
	<-done
	sg.mu.Lock()
	var held []GroupRecord
	for i := range sg.lanes {
		held = append(held, sg.lanes[i].ready...)
		sg.lanes[i].ready = nil
	}
	sg.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var first error
	for _, rec := range held {
		if err := sg.calls.GroupNack(ctx, sg.namespace, sg.stream, rec.Shard, sg.name, rec, 0); err != nil && first == nil && !staleClaim(err) {
			first = err
		}
	}
	return first
}

func staleClaim(err error) bool {
	var be *BrokerError
	return errors.As(err, &be) && be.Code == wire.CodeStaleClaim
}

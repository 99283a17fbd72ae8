package felix

import (
	"context"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// Consumer groups (FEATURE_CONSUMER_GROUP).
//
// A group hands each record of one shard of a durable stream to one
// consumer and takes it back unless it is acknowledged within its
// visibility: GroupPoll claims records, GroupAck finishes one, GroupNack
// hands one back. A record neither acked nor nacked comes round again
// once its visibility lapses, and one delivered FELIX_GROUP_MAX_ATTEMPTS
// times is dead-lettered. Delivery is at least once: a consumer that
// crashes after handling a record and before acking it gets it again.
//
// Every call goes to the shard's leader only: another broker answers
// with a *NotLeaderError, which Client hands back and ClusterClient
// follows. Claim control (a poll's own visibility, GroupExtend, a nack's
// delay) needs FEATURE_GROUP_CLAIM_CONTROL; GroupDeadLetter(s),
// GroupDiscard and GroupRedrive need FEATURE_GROUP_DEAD_LETTERS;
// GroupSeek, GroupDescribe and GroupDelete need FEATURE_GROUP_ADMIN. A
// call the broker did not advertise fails with a *BrokerError of code
// unsupported, sending nothing.

// GroupRecord is one record a poll claimed.
type GroupRecord struct {
	// Shard is the shard the record was claimed on: the shard polled,
	// or, from a ShardedGroup, the shard it merged the record from. Acks
	// and nacks go to that shard.
	Shard  uint32
	Offset uint64
	// Payload is the caller's. The payloads of one poll share one
	// allocation, each capped at its own length (appending to one copies
	// it), so keeping one keeps that poll's payload bytes alive: copy it
	// to keep it alone for long.
	Payload []byte
	// Attempts counts deliveries including this one: 1 is a first
	// delivery; 0 means the broker did not say.
	Attempts uint32
	// Publisher is the principal the record was written by, when the
	// broker stores it (FEATURE_GROUP_PUBLISHER).
	Publisher string
	// TimestampMicros is the record's append time (FEATURE_RECORD_TIMESTAMPS).
	TimestampMicros uint64
}

// GroupPollOptions tune a poll. Zero fields take the broker's defaults.
type GroupPollOptions struct {
	// Wait is how long the broker may hold the poll open for work
	// (capped by FELIX_GROUP_MAX_WAIT_MS); 0 answers at once.
	Wait time.Duration
	// Visibility is how long this poll's claims stand (needs
	// FEATURE_GROUP_CLAIM_CONTROL); 0 is the broker's
	// FELIX_GROUP_VISIBILITY_TIMEOUT_MS.
	Visibility time.Duration
}

// GroupInfo is a group's state on one shard.
type GroupInfo struct {
	// Shard is the shard described.
	Shard uint32
	// Committed is the group's cursor: every offset below it is finished.
	// Nil for a group with no cursor yet.
	Committed *uint64
	// Tail is the shard's next offset.
	Tail uint64
	// InFlight and Owed are the leader's memory: claims standing (and
	// delayed nacks), and records due for redelivery.
	InFlight, Owed uint64
	DeadLetters    uint64
}

// Lag is how many offsets lie between the cursor and the tail.
func (i GroupInfo) Lag() uint64 {
	if i.Committed == nil || *i.Committed > i.Tail {
		return i.Tail
	}
	return i.Tail - *i.Committed
}

// GroupStart is where GroupSeek moves a group.
type GroupStart = wire.GroupSeekStart

// Where a seek may move a group: the oldest record the shard holds, the
// tail, or an offset between them.
var (
	GroupEarliest = GroupStart{Earliest: true}
	GroupLatest   = GroupStart{Latest: true}
)

// GroupAt is the start at offset.
func GroupAt(offset uint64) GroupStart { return GroupStart{Offset: offset} }

func (c *Client) groupScope(namespace, stream string, shard uint32, group string) wire.GroupScope {
	return wire.GroupScope{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, Shard: shard, Group: group}
}

// groupCall sends a group request after checking the broker advertised
// the consumer group feature and bit, and returns the answer.
func (c *Client) groupCall(ctx context.Context, bit uint64, what string, m wire.Message, id *uint64) (wire.Message, error) {
	if err := c.needFeature(wire.FeatureConsumerGroup, "consumer groups (FEATURE_CONSUMER_GROUP; they need a broker with durable storage)"); err != nil {
		return nil, err
	}
	if bit != 0 {
		if err := c.needFeature(bit, what); err != nil {
			return nil, err
		}
	}
	res, err := c.requestCall(ctx, m, id)
	if err != nil {
		return nil, err
	}
	return res.msg, nil
}

// SupportsGroups reports whether the broker advertised consumer groups.
func (c *Client) SupportsGroups() bool { return c.serverFeatures&wire.FeatureConsumerGroup != 0 }

// GroupPoll claims up to maxRecords records of shard for group, waiting up to
// opts.Wait for work. No records is not an error.
func (c *Client) GroupPoll(ctx context.Context, namespace, stream string, shard uint32, group string, maxRecords int, opts GroupPollOptions) ([]GroupRecord, error) {
	if maxRecords <= 0 {
		return nil, notSent(invalidArg("group_poll: max must be at least 1"))
	}
	m := &wire.GroupPoll{GroupScope: c.groupScope(namespace, stream, shard, group), MaxRecords: uint32(min(maxRecords, 1<<20)),
		WaitMS: uint64(max0(opts.Wait).Milliseconds())}
	var bit uint64
	if opts.Visibility > 0 {
		v := uint64(max(opts.Visibility.Milliseconds(), 1))
		m.VisibilityMS, bit = &v, wire.FeatureGroupClaimControl
	}
	ans, err := c.groupCall(ctx, bit, "a poll's own visibility (FEATURE_GROUP_CLAIM_CONTROL)", m, &m.RequestID)
	if err != nil {
		return nil, err
	}
	recs, ok := ans.(*wire.GroupRecords)
	if !ok {
		return nil, fmt.Errorf("felix: group_poll answered with %s", typeOf(ans))
	}
	out := make([]GroupRecord, len(recs.Records))
	for i, r := range recs.Records {
		out[i] = GroupRecord{Shard: shard, Offset: r.Offset, Payload: r.Payload, Attempts: r.Attempts, Publisher: r.Publisher, TimestampMicros: r.TimestampMicros}
	}
	return out, nil
}

func max0(d time.Duration) time.Duration { return max(d, 0) }

// GroupAck finishes offset for group. Acking a finished record again is
// not an error; acking one this leader never handed out (after a seek, or
// written after a failover) is a *BrokerError of code stale_claim.
func (c *Client) GroupAck(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error {
	m := &wire.GroupAck{GroupScope: c.groupScope(namespace, stream, shard, group), Offset: &offset}
	_, err := c.groupCall(ctx, 0, "", m, &m.RequestID)
	return err
}

// GroupNack hands rec back for redelivery after delay (0: at once; a
// delay needs FEATURE_GROUP_CLAIM_CONTROL). It names rec's delivery, so a
// nack that comes after the claim lapsed and the record went out again is
// refused stale_claim rather than taking it from its new holder.
func (c *Client) GroupNack(ctx context.Context, namespace, stream string, shard uint32, group string, rec GroupRecord, delay time.Duration) error {
	m := &wire.GroupNack{GroupScope: c.groupScope(namespace, stream, shard, group), Offset: &rec.Offset}
	if rec.Attempts > 0 {
		a := rec.Attempts
		m.Attempts = &a
	}
	var bit uint64
	if delay > 0 {
		d := uint64(max(delay.Milliseconds(), 1))
		m.DelayMS, bit = &d, wire.FeatureGroupClaimControl
	}
	_, err := c.groupCall(ctx, bit, "a delayed nack (FEATURE_GROUP_CLAIM_CONTROL)", m, &m.RequestID)
	return err
}

// GroupExtend keeps the claim on rec standing for extend from now and
// returns what the broker granted (capped by FELIX_GROUP_MAX_VISIBILITY_MS).
// A claim that lapsed or went out again is refused stale_claim.
func (c *Client) GroupExtend(ctx context.Context, namespace, stream string, shard uint32, group string, rec GroupRecord, extend time.Duration) (time.Duration, error) {
	m := &wire.GroupExtend{GroupScope: c.groupScope(namespace, stream, shard, group), Offset: &rec.Offset,
		ExtendMS: uint64(max0(extend).Milliseconds())}
	if rec.Attempts > 0 {
		a := rec.Attempts
		m.Attempts = &a
	}
	ans, err := c.groupCall(ctx, wire.FeatureGroupClaimControl, "group_extend (FEATURE_GROUP_CLAIM_CONTROL)", m, &m.RequestID)
	if err != nil {
		return 0, err
	}
	e, ok := ans.(*wire.GroupExtended)
	if !ok {
		return 0, fmt.Errorf("felix: group_extend answered with %s", typeOf(ans))
	}
	return time.Duration(e.VisibleMS) * time.Millisecond, nil
}

// GroupDeadLetter lists offset as a dead letter and finishes it; a record
// already finished is invalid_request.
func (c *Client) GroupDeadLetter(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error {
	m := &wire.GroupDeadLetter{GroupScope: c.groupScope(namespace, stream, shard, group), Offset: &offset}
	_, err := c.groupCall(ctx, wire.FeatureGroupDeadLetters, "group_dead_letter (FEATURE_GROUP_DEAD_LETTERS)", m, &m.RequestID)
	return err
}

// GroupDeadLetters returns the group's dead letters, offsets ascending.
// A dead letter is a pointer: the record is still in the stream's log.
func (c *Client) GroupDeadLetters(ctx context.Context, namespace, stream string, shard uint32, group string) ([]uint64, error) {
	m := &wire.GroupDeadLetters{GroupScope: c.groupScope(namespace, stream, shard, group)}
	ans, err := c.groupCall(ctx, wire.FeatureGroupDeadLetters, "group_dead_letters (FEATURE_GROUP_DEAD_LETTERS)", m, &m.RequestID)
	if err != nil {
		return nil, err
	}
	l, ok := ans.(*wire.GroupDeadLetterList)
	if !ok {
		return nil, fmt.Errorf("felix: group_dead_letters answered with %s", typeOf(ans))
	}
	return l.Offsets, nil
}

// GroupDiscard drops offset from the dead letters.
func (c *Client) GroupDiscard(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error {
	m := &wire.GroupDiscard{GroupScope: c.groupScope(namespace, stream, shard, group), Offset: &offset}
	_, err := c.groupCall(ctx, wire.FeatureGroupDeadLetters, "group_discard (FEATURE_GROUP_DEAD_LETTERS)", m, &m.RequestID)
	return err
}

// GroupRedrive puts the dead letter offset back in play.
func (c *Client) GroupRedrive(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error {
	m := &wire.GroupRedrive{GroupScope: c.groupScope(namespace, stream, shard, group), Offset: &offset}
	_, err := c.groupCall(ctx, wire.FeatureGroupDeadLetters, "group_redrive (FEATURE_GROUP_DEAD_LETTERS)", m, &m.RequestID)
	return err
}

// GroupSeek moves the group's cursor on shard to start, voiding the
// claims standing (dead letters are kept); with ifNew only a group that
// does not exist yet moves, which is how a group is created elsewhere
// than the oldest record. It returns the cursor and whether it moved.
func (c *Client) GroupSeek(ctx context.Context, namespace, stream string, shard uint32, group string, start GroupStart, ifNew bool) (offset uint64, moved bool, err error) {
	m := &wire.GroupSeek{GroupScope: c.groupScope(namespace, stream, shard, group), Start: &start, IfNew: ifNew}
	ans, err := c.groupCall(ctx, wire.FeatureGroupAdmin, "group_seek (FEATURE_GROUP_ADMIN)", m, &m.RequestID)
	if err != nil {
		return 0, false, err
	}
	p, ok := ans.(*wire.GroupPosition)
	if !ok {
		return 0, false, fmt.Errorf("felix: group_seek answered with %s", typeOf(ans))
	}
	return p.Offset, p.Moved, nil
}

// GroupCreate creates the group on shard at start unless it exists
// already, so it is safe on every start: GroupSeek with ifNew. It returns
// the group's cursor and whether this call created it.
func (c *Client) GroupCreate(ctx context.Context, namespace, stream string, shard uint32, group string, start GroupStart) (offset uint64, created bool, err error) {
	return c.GroupSeek(ctx, namespace, stream, shard, group, start, true)
}

// GroupDescribe returns the group's cursor and counts on shard.
func (c *Client) GroupDescribe(ctx context.Context, namespace, stream string, shard uint32, group string) (GroupInfo, error) {
	m := &wire.GroupDescribe{GroupScope: c.groupScope(namespace, stream, shard, group)}
	ans, err := c.groupCall(ctx, wire.FeatureGroupAdmin, "group_describe (FEATURE_GROUP_ADMIN)", m, &m.RequestID)
	if err != nil {
		return GroupInfo{}, err
	}
	i, ok := ans.(*wire.GroupInfo)
	if !ok {
		return GroupInfo{}, fmt.Errorf("felix: group_describe answered with %s", typeOf(ans))
	}
	return GroupInfo{Shard: shard, Committed: i.Committed, Tail: i.Tail, InFlight: i.InFlight, Owed: i.Owed, DeadLetters: i.DeadLetters}, nil
}

// GroupDelete removes the group's cursor and dead letters on shard and
// reports whether it existed; its next poll starts afresh.
func (c *Client) GroupDelete(ctx context.Context, namespace, stream string, shard uint32, group string) (bool, error) {
	m := &wire.GroupDelete{GroupScope: c.groupScope(namespace, stream, shard, group)}
	ans, err := c.groupCall(ctx, wire.FeatureGroupAdmin, "group_delete (FEATURE_GROUP_ADMIN)", m, &m.RequestID)
	if err != nil {
		return false, err
	}
	d, ok := ans.(*wire.GroupDeleted)
	if !ok {
		return false, fmt.Errorf("felix: group_delete answered with %s", typeOf(ans))
	}
	return d.Existed, nil
}

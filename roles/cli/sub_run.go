package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// errFromNeedsShard refuses --from OFFSET on a stream of several shards
// without --shard: an offset belongs to one shard.
var errFromNeedsShard = errors.New("--from OFFSET names an offset of one shard, and this stream has several; " +
	"add --shard N, or start every shard with --from earliest or latest")

// maxMergedShards bounds the shards one sub reads at once (one
// subscription each).
const maxMergedShards = 256

// subRun is one felix sub: what it reads, where each shard's output
// stands, and how it prints. Its methods run on the command's goroutine;
// only the readers of a session (sub_session.go) run beside it.
type subRun struct {
	ns, stream string
	start      wire.StartPosition
	// shards are the shards read, in subscription order: the one --shard
	// names, or nil until the first subscribe found every shard.
	shards    []uint32
	count     uint64 // events to print; 0 is no limit
	positions bool
	p         printer
	errw      io.Writer
	// redial connects again after the connection was lost.
	redial func(ctx context.Context) (brokerClient, error)

	printed uint64
	cursors map[uint32]*shardCursor
}

// shardCursor is where the output of one shard stands.
type shardCursor struct {
	// last is the offset of the last event printed, valid when hasLast.
	last    uint64
	hasLast bool
	// from is where a new subscription carries on with no gap and no
	// repeat, valid when fromOK: after the last event printed, or else the
	// start offset the first subscribe reported.
	from   uint64
	fromOK bool
}

// run subscribes and prints until count events were printed or ctx ends
// (a clean exit). A durable subscription lost with its connection is
// resumed on a new one (resume.go); anything else ends the run.
func (r *subRun) run(ctx context.Context, bc brokerClient) error {
	r.cursors = map[uint32]*shardCursor{}
	subs, err := r.subscribeFirst(ctx, bc)
	if err != nil {
		return err
	}
	r.announce(subs)
	var res resumer
	defer res.close()
	for {
		progress, err := r.session(ctx, bc, subs)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		if !r.canResume(err) {
			return err
		}
		if progress {
			res.failures = 0
		}
		fmt.Fprintf(r.errw, "%v; resuming %s\n", err, r.resumePoints())
		bc, subs, err = res.resume(ctx, r, err)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		fmt.Fprintf(r.errw, "resumed %s\n", r.resumePoints())
	}
}

// subscribeFirst opens the first subscriptions: the shard --shard names,
// or every shard of the stream, found by subscribing to shard 0, 1, ...
// until the broker says the stream has no more (a subscribe needs only
// the permission to subscribe, where asking the control plane for the
// stream's width would need another).
func (r *subRun) subscribeFirst(ctx context.Context, bc brokerClient) ([]eventSource, error) {
	var subs []eventSource
	fail := func(err error) ([]eventSource, error) {
		closeAll(subs)
		return nil, err
	}
	open := func(shard uint32, start wire.StartPosition) error {
		sub, err := bc.SubscribeFrom(ctx, r.ns, r.stream, felix.SubscribeOptions{Start: start, Shard: shard})
		if err != nil {
			return err
		}
		subs = append(subs, sub)
		r.cursors[shard] = &shardCursor{}
		r.cursors[shard].from, r.cursors[shard].fromOK = sub.StartOffset()
		return nil
	}
	if r.shards != nil {
		if err := open(r.shards[0], r.start); err != nil {
			return fail(err)
		}
		return subs, nil
	}
	for shard := uint32(0); shard < maxMergedShards; shard++ {
		start := r.start
		if shard > 0 && start.Kind == wire.StartOffset {
			start = felix.Latest() // only to learn whether the shard exists
		}
		err := open(shard, start)
		if shard > 0 && isShardOutOfRange(err) {
			return subs, nil
		}
		if err != nil {
			return fail(err)
		}
		if shard > 0 && r.start.Kind == wire.StartOffset {
			return fail(errFromNeedsShard)
		}
		r.shards = append(r.shards, shard)
	}
	fmt.Fprintf(r.errw, "the stream has more than %d shards; reading the first %d (read others with --shard N)\n",
		maxMergedShards, maxMergedShards)
	return subs, nil
}

// isShardOutOfRange reports the broker's refusal of a shard the stream
// does not have.
func isShardOutOfRange(err error) bool {
	var be *felix.BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeInvalidRequest {
		return false
	}
	reason, _ := be.Detail[wire.DetailReason].(string)
	return reason == "shard_out_of_range"
}

func closeAll(subs []eventSource) {
	for _, s := range subs {
		if s != nil {
			_ = s.Close()
		}
	}
}

// announce says on standard error that every shard is subscribed, and
// where each joined: from then on a publish reaches this sub.
func (r *subRun) announce(subs []eventSource) {
	offsets := make([]string, 0, len(subs))
	for _, sub := range subs {
		off, ok := sub.StartOffset()
		if !ok {
			offsets = nil
			break
		}
		offsets = append(offsets, fmt.Sprint(off))
	}
	where := "from " + startText(r.start)
	switch {
	case len(offsets) == 1:
		where = "at offset " + offsets[0]
		if live, ok := subs[0].LiveOffset(); ok {
			where += fmt.Sprintf(" (live from offset %d)", live)
		}
	case len(offsets) > 1:
		where = "at offsets " + strings.Join(offsets, ", ")
	}
	fmt.Fprintf(r.errw, "subscribed to %s (%s) %s\n", r.stream, shardsText(r.shards), where)
}

func startText(s wire.StartPosition) string {
	switch s.Kind {
	case wire.StartEarliest:
		return "earliest"
	case wire.StartOffset:
		return fmt.Sprintf("offset %d", s.Offset)
	}
	return "latest"
}

// shardsText names the shards read: "shard 2", "shards 0-3".
func shardsText(shards []uint32) string {
	if len(shards) == 1 {
		return fmt.Sprintf("shard %d", shards[0])
	}
	return fmt.Sprintf("shards %d-%d", shards[0], shards[len(shards)-1])
}

// admit records an event of shard about to be printed, and reports false
// for one at or below the last offset printed: a repeat after a
// resubscribe.
func (r *subRun) admit(shard uint32, ev felix.Event) bool {
	if !ev.HasOffset {
		return true
	}
	c := r.cursors[shard]
	if c.hasLast && ev.Offset <= c.last {
		return false
	}
	c.last, c.hasLast = ev.Offset, true
	c.from, c.fromOK = ev.Offset+1, true
	return true
}

// resumeFrom is where shard carries on after the broker ended it for
// falling behind with resume point brokerFrom.
func (r *subRun) resumeFrom(shard uint32, brokerFrom uint64) uint64 {
	if c := r.cursors[shard]; c.hasLast {
		return c.last + 1
	}
	return brokerFrom
}

// canResume reports whether a session that ended with err can carry on
// on a new connection with no gap: the subscription or its connection was
// lost, or the broker ended it with a refusal a retry may cure (draining,
// when it shuts down), and every shard knows where it stands (a durable
// stream).
func (r *subRun) canResume(err error) bool {
	if !retryableResume(err) {
		return false
	}
	for _, shard := range r.shards {
		if !r.cursors[shard].fromOK {
			return false
		}
	}
	return true
}

// resumePoints names where each shard carries on: "at offset 7",
// "at shard 0 offset 7, shard 1 offset 3".
func (r *subRun) resumePoints() string {
	if len(r.shards) == 1 {
		return fmt.Sprintf("at offset %d", r.cursors[r.shards[0]].from)
	}
	parts := make([]string, len(r.shards))
	for i, shard := range r.shards {
		parts[i] = fmt.Sprintf("shard %d offset %d", shard, r.cursors[shard].from)
	}
	return "at " + strings.Join(parts, ", ")
}

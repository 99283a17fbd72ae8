package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/felixmq/felix/sdk/felix"
)

// shardItem is what a shard's reader hands the printer: an event, or the
// error that ended the subscription.
type shardItem struct {
	idx int // index in subRun.shards
	ev  felix.Event
	err error
}

// session prints the events of subs (one per shard, in r.shards order),
// merged in the order they arrive, until count events were printed or ctx
// ends (nil), or a subscription ends for a reason it cannot cure on this
// connection (that error). A shard the broker ends for falling behind is
// subscribed again here, right after its last event printed. progress
// reports whether anything was printed.
//
// One reader goroutine per shard calls Next and hands items over on
// itemC, which holds one item per shard: a reader waits while the printer
// is behind, so nothing piles up. The readers end when the session does,
// and session waits for them before it closes the subscriptions.
func (r *subRun) session(ctx context.Context, bc brokerClient, subs []eventSource) (progress bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	itemC := make(chan shardItem, len(subs))
	var wg sync.WaitGroup
	cur := subs
	read := func(idx int) {
		sub := cur[idx]
		wg.Go(func() {
			for {
				ev, err := sub.Next(sctx)
				select {
				case itemC <- shardItem{idx: idx, ev: ev, err: err}:
				case <-sctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
		closeAll(cur)
	}()
	for idx := range cur {
		read(idx)
	}
	w := bufio.NewWriter(r.p.w)
	defer w.Flush()
	for r.count == 0 || r.printed < r.count {
		var it shardItem
		select {
		case it = <-itemC: // an item already handed over prints even once ctx ends
		default:
			select {
			case it = <-itemC:
			case <-ctx.Done():
				return progress, nil
			}
		}
		shard := r.shards[it.idx]
		if it.err != nil {
			if ctx.Err() != nil { // interrupted: a clean end
				return progress, nil
			}
			sub, err := r.afterLag(ctx, bc, shard, it.err)
			_ = cur[it.idx].Close()
			cur[it.idx] = sub
			if err != nil {
				return progress, err
			}
			read(it.idx)
			continue
		}
		if !r.admit(shard, it.ev) {
			continue
		}
		if err := r.printEvent(w, shard, it.ev); err != nil {
			return progress, err
		}
		r.printed++
		progress = true
		if err := w.Flush(); err != nil {
			return progress, err
		}
	}
	return progress, nil
}

// afterLag subscribes shard again when err says the broker ended it for
// falling behind; any other err is returned as it is.
func (r *subRun) afterLag(ctx context.Context, bc brokerClient, shard uint32, err error) (eventSource, error) {
	var lagged *felix.SubscriptionLagged
	if !errors.As(err, &lagged) {
		return nil, err
	}
	from := r.resumeFrom(shard, lagged.ResumeFrom)
	fmt.Fprintf(r.errw, "shard %d fell behind the stream; subscribing again at offset %d\n", shard, from)
	return bc.SubscribeFrom(ctx, r.ns, r.stream, felix.SubscribeOptions{Start: felix.AtOffset(from), Shard: shard})
}

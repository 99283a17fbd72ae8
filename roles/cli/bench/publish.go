package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// publishFor publishes p.batch payloads per call for p.duration and returns
// how many payloads the broker took (acknowledged, or handed to the client
// without --acked) and how many calls failed; ok counts the payloads as
// they go (the progress line reads it). Fire-and-forget and a single acked
// caller run in this goroutine; with p.acked and p.inflight > 1, that many
// callers each keep one acked batch outstanding.
//
// With keys, every publish is one payload keyed with the next key in
// turn (p.batch is 1 then).
func publishFor(ctx context.Context, c pubClient, ns, stream string, p pubsubParams, keys [][]byte, ok *atomic.Int64) (published, failed int64) {
	ack := felix.AckNone
	if p.acked {
		ack = felix.AckPerBatch
		if p.batch == 1 {
			ack = felix.AckPerMessage
		}
	}
	callers := 1
	if p.acked {
		callers = max(1, p.inflight)
	}
	payloads := make([][]byte, p.batch)
	for i := range payloads {
		payloads[i] = make([]byte, p.payload)
	}
	var bad atomic.Int64
	deadline := time.Now().Add(p.duration)
	var wg sync.WaitGroup
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				var err error
				if len(keys) > 0 {
					err = c.PublishKeyed(ctx, ns, stream, keys[i%len(keys)], payloads[0], ack)
				} else if p.batch == 1 {
					err = c.Publish(ctx, ns, stream, payloads[0], ack)
				} else {
					// The SDK may keep the slice until it is written: give it
					// a fresh header over the same bytes.
					err = c.PublishBatch(ctx, ns, stream, append([][]byte(nil), payloads...), ack)
				}
				if err != nil {
					bad.Add(1)
					continue
				}
				ok.Add(int64(p.batch))
			}
		}()
	}
	wg.Wait()
	return ok.Load(), bad.Load()
}

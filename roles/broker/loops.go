package broker

import (
	"context"
	"time"
)

// every calls fn each period, and each time wake delivers (a nil wake
// never does), until ctx ends. fn gets the tick's time, or the time of
// the wake-up.
func every(ctx context.Context, period time.Duration, wake <-chan struct{}, fn func(now time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			fn(now)
		case <-wake:
			fn(time.Now())
		}
	}
}

package controlplane

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// bgLoop owns one background loop's goroutine: stop cancels it and waits
// for it. A nil *bgLoop (a loop never started) stops as a no-op.
type bgLoop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startLoop runs pass on every tick of period (of tickC instead, when
// tests give one) and every signal on wakeC (nil: none), until stopped. A
// failed pass is logged as what failed and tried again on the next wake.
func startLoop(log *slog.Logger, what string, period time.Duration, tickC <-chan time.Time, wakeC <-chan struct{}, pass func(context.Context) error) *bgLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &bgLoop{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if tickC == nil {
			t := time.NewTicker(period)
			defer t.Stop()
			tickC = t.C
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tickC:
			case <-wakeC:
			}
			if err := pass(ctx); err != nil && ctx.Err() == nil {
				log.Warn(what+" failed; trying again at the next one", "err", err)
			}
		}
	}()
	return l
}

func (l *bgLoop) stop() {
	if l == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
}

package broker

import (
	"context"
	"sync"
)

// tracker counts running work, like a sync.WaitGroup whose Wait can give
// up when a context ends. The zero value is ready to use.
type tracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n == 0; nil means "closed"
}

func (t *tracker) add(d int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 && d > 0 {
		t.idle = make(chan struct{})
	}
	t.n += d
	if t.n < 0 {
		panic("broker: tracker count below zero")
	}
	if t.n == 0 && t.idle != nil {
		close(t.idle)
	}
}

func (t *tracker) done() { t.add(-1) }

// idleC returns a channel closed once the count is zero.
func (t *tracker) idleC() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return closedC
	}
	return t.idle
}

// wait blocks until the count is zero or ctx ends.
func (t *tracker) wait(ctx context.Context) error {
	select {
	case <-t.idleC():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var closedC = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Package gogroup is a set of goroutines that its owner waits for when it
// shuts down, and that refuses new members once shutdown has begun, so a
// goroutine is never started after the owner stopped waiting (the race a
// bare sync.WaitGroup has when Add may follow Wait).
package gogroup

import "sync"

// Group is a set of goroutines. The zero value is ready.
type Group struct {
	mu     sync.Mutex
	closed bool // guarded by mu
	wg     sync.WaitGroup
}

// Go runs f on a goroutine of the group and reports true, or reports false
// and runs nothing once Close has been called.
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// Close refuses new goroutines from now on and waits for the group's
// running ones to return. It may be called more than once.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

package raftmeta

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// goroutineSet returns every goroutine's stack (as runtime.Stack prints
// it), keyed by its "goroutine N" header. Goroutine ids are never reused.
func goroutineSet() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	set := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, " [")
		set[header] = g
	}
	return set
}

// ignoredGoroutines are those the test binary and the runtime start on
// their own: the test runner's (parallel tests and subtests) and the
// signal and finalizer goroutines.
var ignoredGoroutines = []string{
	"created by testing.",
	"testing.tRunner",
	"os/signal.signal_recv",
	"runtime.ensureSigM",
	"runtime.runfinq",
	"runtime.runCleanups",
}

// checkNoLeaks fails if a goroutine that was not in before is still
// running: whatever package started it (raft, net/http, bbolt, ours),
// everything a test's members started must end with Close. Goroutines
// that are still winding down get a few seconds.
func checkNoLeaks(t testing.TB, before map[string]string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		leaked := newGoroutines(before)
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines outlived Close:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newGoroutines returns the stacks of running goroutines that are not in
// before and not ignored.
func newGoroutines(before map[string]string) []string {
	var out []string
	for id, g := range goroutineSet() {
		if _, old := before[id]; old || ignored(g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func ignored(stack string) bool {
	for _, s := range ignoredGoroutines {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}

// The check sees a goroutine of any package, not only this one's.
func TestCheckNoLeaksSeesEveryPackage(t *testing.T) {
	before := goroutineSet()
	started, stop := make(chan struct{}), make(chan struct{})
	// A goroutine that package time starts, with no raftmeta.(* frame.
	time.AfterFunc(0, func() { close(started); <-stop })
	<-started
	if got := newGoroutines(before); len(got) != 1 {
		t.Fatalf("want the one new goroutine, got %d:\n%s", len(got), strings.Join(got, "\n\n"))
	}
	close(stop)
	checkNoLeaks(t, before)
}

package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress line timing: nothing is drawn for a run shorter than
// progressAfter, then the line is redrawn every progressEvery.
const (
	progressAfter = 2 * time.Second
	progressEvery = 500 * time.Millisecond
)

// progress draws one live status line ("\r... \x1b[K") on a terminal while
// a scenario runs: the time elapsed out of the planned duration and the
// counters the scenario registered. Off a terminal it draws nothing and its
// counters are still safe to use. Its goroutine is owned by the progress:
// stop ends it, waits for it and clears the line.
type progress struct {
	w     io.Writer     // nil: draw nothing
	total time.Duration // planned length of the run; 0 if unknown
	start time.Time

	mu       sync.Mutex // guards counters
	counters []namedCounter

	stopC chan struct{}
	done  chan struct{}
}

type namedCounter struct {
	name string
	n    *atomic.Int64
}

// newProgress returns a progress drawing on w when w is a terminal.
func newProgress(w io.Writer, total time.Duration) *progress {
	p := &progress{total: total, start: time.Now()}
	if isTerminal(w) {
		p.w = w
	}
	return p
}

// isTerminal reports whether w is a character device (a terminal), so
// that piped or redirected output gets no progress line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// counter registers a counter shown as "name N" on the line and returns
// it for the scenario to add to. A nil progress hands out a counter that
// is shown nowhere.
func (p *progress) counter(name string) *atomic.Int64 {
	n := new(atomic.Int64)
	if p == nil {
		return n
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counters = append(p.counters, namedCounter{name: name, n: n})
	return n
}

// run starts drawing; stop must follow.
func (p *progress) run() {
	p.stopC, p.done = make(chan struct{}), make(chan struct{})
	if p.w == nil {
		close(p.done)
		return
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		drawn := false
		for {
			select {
			case <-p.stopC:
				if drawn {
					fmt.Fprint(p.w, "\r\x1b[K")
				}
				return
			case now := <-t.C:
				if now.Sub(p.start) >= progressAfter {
					fmt.Fprint(p.w, "\r"+p.line(now.Sub(p.start))+"\x1b[K")
					drawn = true
				}
			}
		}
	}()
}

// stop ends the drawing, clears the line and waits for the goroutine.
func (p *progress) stop() {
	close(p.stopC)
	<-p.done
}

// line is the status text after elapsed.
func (p *progress) line(elapsed time.Duration) string {
	var b strings.Builder
	b.WriteString(elapsed.Truncate(100 * time.Millisecond).String())
	if p.total > 0 {
		fmt.Fprintf(&b, " / %s", p.total)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.counters {
		fmt.Fprintf(&b, "  %s %d", c.name, c.n.Load())
	}
	return b.String()
}

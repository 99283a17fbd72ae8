package broker

import (
	"context"
	"io"
	"time"
)

// idleReader is a request stream's receive half as its read loop sees
// it. While the loop waits for the first byte of a frame (it is between
// frames and has read nothing of the next), the stream counts as parked
// on its connection: nothing but the client would end it, and a drain
// loses nothing by interrupting it, since it holds no part of a frame. A
// subscriber's control stream sits there for the whole subscription.
type idleReader struct {
	r io.Reader
	c *connection
	// boundary is set by the loop before it reads a frame and cleared by
	// the first byte of it; only the loop's goroutine touches it.
	boundary bool
}

// betweenFrames tells r's loop it is about to read a new frame; a no-op
// for a reader that is not an idleReader.
func betweenFrames(r io.Reader) {
	if ir, ok := r.(*idleReader); ok {
		ir.boundary = true
	}
}

func (ir *idleReader) Read(p []byte) (int, error) {
	if !ir.boundary {
		return ir.r.Read(p)
	}
	ir.c.park(1)
	n, err := ir.r.Read(p)
	ir.c.park(-1)
	if n > 0 {
		ir.boundary = false
	}
	return n, err
}

// park counts a request stream in (d = 1) or out of (d = -1) its wait
// for a frame, and once the drain started tells it a stream parked.
func (c *connection) park(d int64) {
	c.parked.Add(d)
	if d < 0 {
		c.unparked.Add(1)
	}
	if d > 0 && c.draining.Load() {
		select {
		case c.parkC <- struct{}{}:
		default:
		}
	}
}

// count returns the work running now.
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// idleQuiet is how long every open request stream must stay parked
// between frames, with none reading a byte, before the drain takes them
// as idle: a publisher whose frames are still arriving parks for moments
// between them, and must not be cut off.
const idleQuiet = 100 * time.Millisecond

// waitRequests is the drain's first wait: for the request streams to
// finish by themselves, until graceCtx ends, or until every one still
// open has stayed parked between frames for idleQuiet (idle, like a
// subscriber's control stream), since only the client would end those
// and an idle subscription must not hold the shutdown.
func (c *connection) waitRequests(graceCtx context.Context) {
	c.draining.Store(true)
	quiet := time.NewTimer(idleQuiet)
	defer quiet.Stop()
	for {
		var quietC <-chan time.Time
		seen := c.unparked.Load()
		if c.parked.Load() >= int64(c.requests.count()) {
			quiet.Reset(idleQuiet)
			quietC = quiet.C
		}
		select {
		case <-c.requests.idleC():
			return
		case <-graceCtx.Done():
			return
		case <-c.done:
			return
		case <-c.parkC:
		case <-quietC:
			if c.unparked.Load() == seen && c.parked.Load() >= int64(c.requests.count()) {
				return
			}
		}
	}
}

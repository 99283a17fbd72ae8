package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// fakeReceive records how kick interrupts a stream's read.
type fakeReceive struct {
	deadlineErr error
	deadline    time.Time
	cancelled   *transport.StreamErrorCode
}

func (f *fakeReceive) SetReadDeadline(t time.Time) error {
	f.deadline = t
	return f.deadlineErr
}
func (f *fakeReceive) CancelRead(c transport.StreamErrorCode) { f.cancelled = &c }

// TestKickEndsTheReadEvenWithoutADeadline: a kick wakes the read with a
// deadline; when the deadline cannot be set, it cancels the read, so a
// revoked stream never goes on reading.
func TestKickEndsTheReadEvenWithoutADeadline(t *testing.T) {
	why := wire.NewError(wire.CodeRevoked, "revoked")
	ok := &fakeReceive{}
	(&controlStream{rd: ok}).kick(why)
	if ok.deadline.IsZero() || ok.cancelled != nil {
		t.Fatalf("kick with a working deadline: deadline %v, cancelled %v", ok.deadline, ok.cancelled)
	}
	broken := &fakeReceive{deadlineErr: errors.New("stream closed")}
	cs := &controlStream{rd: broken}
	cs.kick(why)
	if broken.cancelled == nil || *broken.cancelled != transport.StreamErrorCode(wire.CloseRefused) {
		t.Fatalf("kick whose deadline failed did not cancel the read: %v", broken.cancelled)
	}
	if cs.kicked.Load() != why {
		t.Fatal("the kick's reason was not kept")
	}
}

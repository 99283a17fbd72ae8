package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// fakeSend records what writeLast does to an event stream.
type fakeSend struct {
	deadlineErr, writeErr error
	wrote                 []byte
	closed                bool
	cancelled             *transport.StreamErrorCode
}

func (f *fakeSend) Write(b []byte) (int, error) {
	if f.writeErr != nil {
		return 0, f.writeErr
	}
	f.wrote = append(f.wrote, b...)
	return len(b), nil
}
func (f *fakeSend) SetWriteDeadline(time.Time) error { return f.deadlineErr }
func (f *fakeSend) Close() error                     { f.closed = true; return nil }
func (f *fakeSend) CancelWrite(c transport.StreamErrorCode) {
	f.cancelled = &c
}

// TestWriteLastSurfacesErrors checks that every failure of an event
// stream's last write is returned and resets the stream, instead of being
// dropped (a stalled write without its deadline, or an empty frame).
func TestWriteLastSurfacesErrors(t *testing.T) {
	boom := errors.New("boom")
	lagged := &wire.SubscriptionLagged{SubscriptionID: 1, ResumeFrom: 9}
	for name, tc := range map[string]struct {
		f    *fakeSend
		last wire.Message
	}{
		"encode":   {&fakeSend{}, (*wire.SubscriptionLagged)(nil)},
		"deadline": {&fakeSend{deadlineErr: boom}, lagged},
		"write":    {&fakeSend{writeErr: boom}, lagged},
	} {
		t.Run(name, func(t *testing.T) {
			err := writeLast(tc.f, tc.last)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.f.cancelled == nil || *tc.f.cancelled != transport.StreamErrorCode(wire.CloseShutdown) || tc.f.closed || len(tc.f.wrote) != 0 {
				t.Fatalf("stream: cancelled=%v closed=%v wrote=%d", tc.f.cancelled, tc.f.closed, len(tc.f.wrote))
			}
		})
	}
	f := &fakeSend{}
	if err := writeLast(f, lagged); err != nil || !f.closed || f.cancelled != nil || len(f.wrote) <= wire.HeaderLen {
		t.Fatalf("a good last frame: err=%v closed=%v cancelled=%v", err, f.closed, f.cancelled)
	}
}

package felix

import (
	"fmt"

	"github.com/felixmq/felix/wire"
)

// SubscribeCursorError says that the start offset of a subscribe or a
// Read cannot be served: retention already removed it (TooOld) or it lies
// past the shard's tail. Available is the nearest offset that would have
// worked: the oldest one retained when TooOld, the tail otherwise, so
// starting there takes the smallest possible gap. Find it with errors.As.
type SubscribeCursorError struct {
	Reason    wire.CursorReason // too_old or in_future
	TooOld    bool              // Reason is too_old
	Requested uint64
	Available uint64
	Message   string // the broker's wording, may be empty
}

// Error implements error.
func (e *SubscribeCursorError) Error() string {
	what := "is past the tail"
	if e.TooOld {
		what = "is older than what retention kept"
	}
	msg := fmt.Sprintf("felix: start offset %d %s; nearest available is %d", e.Requested, what, e.Available)
	if e.Message != "" {
		msg += " (" + e.Message + ")"
	}
	return msg
}

// cursorError converts the wire message.
func cursorError(m *wire.SubscribeCursorError) *SubscribeCursorError {
	return &SubscribeCursorError{Reason: m.Reason, TooOld: m.Reason == wire.CursorTooOld,
		Requested: m.Requested, Available: m.Available, Message: m.Message}
}

// SubscriptionLagged ends a subscription on a durable stream whose queue
// on the broker dropped records. Next returns it after the events that
// arrived before the drop. ResumeFrom is the first offset the broker's
// queue dropped; to resume without a gap, subscribe again after the last
// event received (which may be below ResumeFrom), or at ResumeFrom when
// none was. A ClusterSubscription does this by itself. Find it with
// errors.As.
type SubscriptionLagged struct {
	SubscriptionID uint64
	ResumeFrom     uint64
}

// Error implements error.
func (e *SubscriptionLagged) Error() string {
	return fmt.Sprintf("felix: subscription %d fell behind and was ended by the broker; resume from offset %d",
		e.SubscriptionID, e.ResumeFrom)
}

package felix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/felixmq/felix/wire"
)

// StartPosition is where a subscription starts.
type StartPosition = wire.StartPosition

// Latest starts at the next event published (the default).
func Latest() StartPosition { return StartPosition{Kind: wire.StartLatest} }

// Earliest starts at the oldest event the broker still holds.
func Earliest() StartPosition { return StartPosition{Kind: wire.StartEarliest} }

// AtOffset starts at offset n.
func AtOffset(n uint64) StartPosition { return StartPosition{Kind: wire.StartOffset, Offset: n} }

// SubscribeOptions choose the start position and shard of a subscription.
type SubscribeOptions struct {
	Start StartPosition
	Shard uint32
}

// Event is one delivered event. Payload is owned by the caller.
type Event struct {
	Payload   []byte
	Offset    uint64 // valid when HasOffset (durable streams)
	HasOffset bool
	// SkippedBefore counts the offsets just before this event that hold
	// no event (generation-start records). Only the first event of a batch
	// carries it, so Offset-SkippedBefore is the offset expected after the
	// previous event; anything larger is a drop.
	SkippedBefore uint64
	// Timestamp is when the broker appended the event (durable streams,
	// a broker that sends times); zero otherwise. TimestampMicros is the
	// same in microseconds since the Unix epoch.
	Timestamp       time.Time
	TimestampMicros uint64
	// Publisher is the principal the broker accepted the publish from,
	// when the broker reports it; "" otherwise.
	Publisher string
	Namespace string
	Stream    string
	// Shard is the shard the event was read from.
	Shard uint32
}

// Subscribe subscribes to shard 0 of namespace/stream from the latest
// event. A refusal is a *BrokerError.
func (c *Client) Subscribe(ctx context.Context, namespace, stream string) (*Subscription, error) {
	return c.subscribe(ctx, namespace, stream, nil)
}

// SubscribeFrom subscribes with an explicit start position and shard.
func (c *Client) SubscribeFrom(ctx context.Context, namespace, stream string, o SubscribeOptions) (*Subscription, error) {
	return c.subscribe(ctx, namespace, stream, &o)
}

func (c *Client) subscribe(ctx context.Context, namespace, stream string, o *SubscribeOptions) (*Subscription, error) {
	msg := &wire.Subscribe{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream}
	if o != nil {
		start, shard := o.Start, o.Shard
		msg.Start, msg.Shard = &start, &shard
	}
	cs, ok, err := request[*wire.Subscribed](ctx, c, msg)
	if err != nil {
		return nil, err
	}
	sub := newSubscription(c, ok.SubscriptionID, namespace, stream, cs)
	if o != nil {
		sub.shard = o.Shard
	}
	sub.startOffset, sub.liveOffset = ok.StartOffset, ok.LiveOffset
	if err := sub.life.start(); err != nil {
		return nil, err
	}
	return sub, nil
}

// request opens a control stream for msg, sends it, closes the send half
// and reads the answer, which must be an A: a subscribe's or a cache
// watch's, whose control stream then stays open as long as its event
// stream. A start the broker cannot serve is a *SubscribeCursorError, a
// refusal a *BrokerError.
func request[A wire.Message](ctx context.Context, c *Client, msg interface {
	wire.Message
	wire.Validator
}) (*ctrlStream, A, error) {
	var zero A
	if err := msg.Validate(); err != nil {
		return nil, zero, notSent(fmt.Errorf("felix: %w", err))
	}
	if err := c.checkUsable(); err != nil {
		return nil, zero, err
	}
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, zero, err
	}
	ans, err := c.roundTrip(ctx, cs, msg)
	if err == nil {
		if a, ok := ans.(A); ok {
			return cs, a, nil
		}
		err = fmt.Errorf("felix: %s answered with %q", msg.MessageType(), ans.MessageType())
	}
	cs.abort()
	return nil, zero, err
}

// roundTrip sends msg on cs, closes its send half and reads the answer; a
// refusal is returned as an error.
func (c *Client) roundTrip(ctx context.Context, cs *ctrlStream, msg wire.Message) (wire.Message, error) {
	stop := context.AfterFunc(ctx, cs.abort)
	defer stop()
	frame, err := wire.AppendMessageFrame(nil, msg)
	if err != nil {
		return nil, notSent(err)
	}
	if _, err := cs.s.Write(frame); err != nil {
		return nil, c.subscribeFailure(ctx, err)
	}
	_ = cs.s.Close()
	ans, err := readMessage(cs.fr)
	if err != nil {
		return nil, c.subscribeFailure(ctx, err)
	}
	switch m := ans.(type) {
	case *wire.SubscribeCursorError:
		return nil, cursorError(m)
	case *wire.ErrorMsg:
		return nil, brokerErrorFromWire(m.Err())
	case *wire.NotLeader:
		return nil, notLeaderError(m)
	case *wire.Unsupported:
		return nil, unsupported(m.RequestType)
	}
	return ans, nil
}

func (c *Client) subscribeFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil && !c.dead() {
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("felix: the broker ended the subscribe stream")
	}
	return c.failure(err)
}

// Subscription is one live subscription. Next is safe to call from one
// goroutine at a time; Close may be called from any goroutine.
type Subscription struct {
	life      streamLife[Event]
	namespace string
	stream    string
	shard     uint32

	// Where a subscribe with a start joined a durable stream; nil when the
	// broker did not say. Set before the subscription is returned.
	startOffset, liveOffset *uint64
}

func newSubscription(c *Client, id uint64, ns, stream string, ctrl *ctrlStream) *Subscription {
	s := &Subscription{namespace: ns, stream: stream}
	s.life.init(c, id, ctrl)
	s.life.readFrame, s.life.eofReason = s.readFrame, "the broker ended the event stream"
	return s
}

// ID returns the broker-assigned subscription id.
func (s *Subscription) ID() uint64 { return s.life.id }

// StartOffset returns the offset the subscription started at. ok is false
// unless the subscribe carried a start (SubscribeFrom), the stream is
// durable and the broker reported it.
func (s *Subscription) StartOffset() (offset uint64, ok bool) { return maybe(s.startOffset) }

// LiveOffset returns the shard's tail when the subscription was
// registered: events below it are catch-up, events from it on are new.
// ok is false in the same cases as StartOffset.
func (s *Subscription) LiveOffset() (offset uint64, ok bool) { return maybe(s.liveOffset) }

func maybe(p *uint64) (uint64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// Next returns the next event. It is cancel-safe: when ctx ends nothing is
// lost and the next call gets the next event. Calls with the same ctx (or
// one sharing its Done channel) share the arrangement that interrupts the
// read; a fresh timeout per call pays for a new one each time. After the connection dies or
// the event stream ends unasked, it returns the events already read
// and then ErrSubscriptionLost; an error the broker sent on the stream ends
// it with that *BrokerError, and a durable subscription whose broker queue
// dropped ends with *SubscriptionLagged. After Subscription.Close it returns ErrClosed
// at once; after Client.Close, the events already read and then
// ErrClosed.
func (s *Subscription) Next(ctx context.Context) (Event, error) { return s.life.next(ctx) }

// Close ends the subscription: the event stream is reset, so the broker
// drops it. Next returns ErrClosed afterwards.
func (s *Subscription) Close() error { return s.life.close() }

package felix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// What the client offers in every auth: what it can decode and use. What
// it sends toward the broker is still limited to what auth_ok advertised.
const (
	clientFlags = wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets | wire.FlagEventBatchSkipped |
		wire.FlagEventBatchTimestamps | wire.FlagEventBatchPublisher | wire.FlagBinaryPublishAckOffset
	clientFeatures = wire.FeatureErrorCodes | wire.FeatureUnsupported | wire.FeatureCacheDelete | wire.FeatureCacheConditional | wire.FeatureCounters |
		wire.FeatureSubscriptionLagged | wire.FeatureStreamRead | wire.FeatureRecordTimestamps |
		wire.FeatureCacheWatch | wire.FeatureCacheWatchRetained |
		wire.FeatureTopology | wire.FeatureRedirect | wire.FeatureStreamShards | wire.FeatureCacheShards |
		wire.FeatureShardOwners | wire.FeatureShardMoved | wire.FeaturePublishConditional | wire.FeatureAtomicCommit |
		wire.FeatureConsumerGroup | wire.FeatureGroupClaimControl | wire.FeatureGroupDeadLetters | wire.FeatureGroupAdmin |
		wire.FeatureGroupPublisher
)

// Client is one QUIC connection to one broker, carrying a pool of publish
// streams, a pool of cache streams and the subscriptions opened through it.
// All methods are safe for concurrent use.
type Client struct {
	cfg  Config
	conn transport.Conn

	// tokens authenticates every stream this client opens. parent is the
	// gateway Client a Handle's client shares the connection of; nil for
	// a Client from Connect, which owns the connection.
	tokens TokenProvider
	parent *Client

	// Set once by the first auth in Connect, read-only afterwards.
	serverFlags    uint16
	serverFeatures uint64

	nextID atomic.Uint64 // request ids, from 1

	// probing is set while a ClusterClient probes this connection
	// (cluster_probe.go).
	probing atomic.Bool

	ctx     context.Context // ends when the client shuts down
	cancel  context.CancelFunc
	closedC chan struct{} // closed by shutdown
	wg      sync.WaitGroup

	closeOnce   sync.Once
	closeMu     sync.Mutex
	closeReason error                // what subscriptions report after shutdown; guarded by closeMu
	stopping    bool                 // no new goroutines once set; guarded by closeMu
	children    map[*Client]struct{} // open handles' clients; guarded by closeMu
	subs        map[aborter]struct{} // a handle's open subscriptions and watches; guarded by closeMu

	pub    *publishPool
	cache  *cachePool
	router *router
}

// Connect dials the broker, authenticates one stream to learn what the
// broker supports (an auth refusal is returned as *BrokerError) and starts
// the client's workers.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tlsConf, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	dialCtx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	start := time.Now()
	conn, err := dial(dialCtx, cfg, tlsConf)
	if err != nil {
		return nil, dialError(cfg.Addr, cfg.Transport, start, err)
	}
	c := newClient(cfg, conn)
	first, err := c.openStream(ctx)
	if err != nil {
		c.shutdown(ErrClosed)
		return nil, err
	}
	c.serverFlags, c.serverFeatures = first.ok.ServerFlags, first.ok.ServerFeatures
	c.start(first)
	return c, nil
}

func transportConfig(cfg Config) transport.Config {
	return transport.Config{
		HandshakeTimeout:           cfg.DialTimeout,
		KeepAlive:                  cfg.KeepAlive,
		MaxIdleTimeout:             cfg.MaxIdleTimeout,
		InitialStreamReceiveWindow: 1 << 20,
		MaxStreamReceiveWindow:     16 << 20,
		InitialConnReceiveWindow:   4 << 20,
		MaxConnReceiveWindow:       64 << 20,
		MaxIncomingStreams:         -1, // the broker opens only unidirectional streams
		MaxIncomingUniStreams:      10000,
	}
}

func newClient(cfg Config, conn transport.Conn) *Client {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{cfg: cfg, conn: conn, tokens: StaticToken(cfg.Token), ctx: ctx, cancel: cancel,
		closedC: make(chan struct{}), children: map[*Client]struct{}{}, subs: map[aborter]struct{}{}}
	c.router = newRouter(c)
	return c
}

// start launches the pools and the event router. first is an already
// authenticated stream, handed to the first cache worker.
func (c *Client) start(first *ctrlStream) {
	c.pub = newPublishPool(c)
	c.cache = newCachePool(c, first)
	c.spawn(c.router.run)
}

// spawn runs f on a goroutine the client owns and waits for in shutdown.
// It returns false, running nothing, once shutdown has begun.
func (c *Client) spawn(f func()) bool {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.stopping {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// ServerFlags returns the frame flags the broker advertised.
func (c *Client) ServerFlags() uint16 { return c.serverFlags }

// ServerFeatures returns the feature bits the broker advertised.
func (c *Client) ServerFeatures() uint64 { return c.serverFeatures }

// Close closes the connection (application error 0), ends every
// subscription with ErrClosed, closes every Handle made from the client and
// waits for the client's goroutines. Fire-and-forget publishes not yet
// written are lost; call Finish first to flush them.
//
// On a Handle, Close ends only the handle's own streams and
// subscriptions; the connection and the gateway Client stay open.
func (c *Client) Close() error {
	c.shutdown(ErrClosed)
	return nil
}

// shutdown closes the client; reason is what its subscriptions report.
// A root client closes the connection, which ends every stream on it; a
// handle's client aborts its own streams and leaves the connection open.
func (c *Client) shutdown(reason error) {
	c.closeOnce.Do(func() {
		c.closeMu.Lock()
		c.closeReason = reason
		c.stopping = true
		kids, subs := c.children, c.subs
		c.children, c.subs = nil, nil
		c.closeMu.Unlock()
		close(c.closedC)
		c.cancel()
		if c.parent == nil {
			_ = c.conn.CloseWithError(transport.ApplicationErrorCode(wire.CloseNoError), "client closed")
		} else {
			c.parent.forgetChild(c)
		}
		for sub := range subs {
			sub.abort()
		}
		for kid := range kids {
			kid.shutdown(reason)
		}
	})
	c.wg.Wait()
}

// shutdownReason returns the reason given to shutdown, or nil.
func (c *Client) shutdownReason() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	return c.closeReason
}

// dead reports whether the client was closed or its connection ended.
func (c *Client) dead() bool {
	return c.ctx.Err() != nil || c.conn.Context().Err() != nil
}

// failure classifies an I/O error: ErrClosed after Close, ErrConnectionLost
// (wrapped) when the connection is gone, err otherwise. A client a
// ClusterClient shut down because its connection failed (shutdown reason
// ErrSubscriptionLost) reports the connection lost, not closed: calls in
// flight on it may race that shutdown and must be judged by what
// happened to the connection.
func (c *Client) failure(err error) error {
	replaced := false
	if c.ctx.Err() != nil {
		if !errors.Is(c.shutdownReason(), ErrSubscriptionLost) {
			return ErrClosed
		}
		replaced = true
	}
	if cerr := c.conn.Context().Err(); cerr != nil || replaced || isConnLevel(err) {
		cause := context.Cause(c.conn.Context())
		if cause == nil {
			cause = err
		}
		return fmt.Errorf("%w: %v", ErrConnectionLost, cause)
	}
	return err
}

// isConnLevel reports whether err ended the whole connection, not one
// stream.
func isConnLevel(err error) bool {
	var ae *transport.ApplicationError
	return errors.As(err, &ae) || errors.Is(err, transport.ErrIdleTimeout) ||
		errors.Is(err, transport.ErrConnectionLost) || errors.Is(err, transport.ErrHandshakeTimeout)
}

// checkUsable fails fast, before sending anything, on a closed client or a
// dead connection.
func (c *Client) checkUsable() error {
	if c.ctx.Err() != nil {
		return notSent(c.failure(ErrClosed))
	}
	if c.conn.Context().Err() != nil {
		return notSent(c.failure(context.Cause(c.conn.Context())))
	}
	return nil
}

// ctrlStream is an authenticated bidirectional stream.
type ctrlStream struct {
	s  transport.Stream
	fr *wire.FrameReader
	ok *wire.AuthOK
}

// abort cancels both halves; used when a stream is abandoned.
func (cs *ctrlStream) abort() {
	cs.s.CancelRead(transport.StreamErrorCode(wire.CloseNoError))
	cs.s.CancelWrite(transport.StreamErrorCode(wire.CloseNoError))
}

// openStream opens a bidirectional stream and runs the auth round trip.
// Failures are ErrClosed, ErrConnectionLost or *BrokerError, all marked as
// not sent.
func (c *Client) openStream(ctx context.Context) (*ctrlStream, error) {
	return c.openStreamOffering(ctx, 0)
}

// openStreamOffering is openStream offering extra features besides the
// client's own (an idempotent producer's stream offers
// FEATURE_PUBLISH_PIPELINE).
func (c *Client) openStreamOffering(ctx context.Context, extra uint64) (*ctrlStream, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	s, err := c.conn.OpenStreamSync(ctx)
	if err != nil {
		if ctx.Err() != nil && c.conn.Context().Err() == nil {
			return nil, notSent(fmt.Errorf("felix: open stream: %w", ctx.Err()))
		}
		return nil, notSent(c.failure(err))
	}
	cs := &ctrlStream{s: s, fr: wire.NewFrameReader(s, c.cfg.MaxFrameBytes)}
	stop := context.AfterFunc(ctx, cs.abort)
	defer stop()
	ok, err := c.authenticate(ctx, cs, clientFeatures|extra)
	if err != nil {
		cs.abort()
		if ctx.Err() != nil && c.conn.Context().Err() == nil {
			err = fmt.Errorf("felix: auth: %w", ctx.Err())
		}
		return nil, notSent(err)
	}
	cs.ok = ok
	return cs, nil
}

func (c *Client) authenticate(ctx context.Context, cs *ctrlStream, features uint64) (*wire.AuthOK, error) {
	token, err := c.tokens.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("felix: token provider: %w", err)
	}
	auth := &wire.Auth{TenantID: c.cfg.Tenant, Token: token, ClientFlags: clientFlags, Features: features}
	frame, err := wire.AppendMessageFrame(nil, auth)
	if err != nil {
		return nil, err
	}
	if _, err := cs.s.Write(frame); err != nil {
		return nil, c.failure(err)
	}
	msg, err := readMessage(cs.fr)
	if err != nil {
		return nil, c.failure(err)
	}
	switch m := msg.(type) {
	case *wire.AuthOK:
		return m, nil
	case *wire.ErrorMsg:
		return nil, fromWire(m.Err())
	default:
		return nil, fmt.Errorf("felix: auth answered with %q", msg.MessageType())
	}
}

// readMessage reads the next frame and decodes it as a JSON message.
func readMessage(fr *wire.FrameReader) (wire.Message, error) {
	f, err := fr.Next()
	if err != nil {
		return nil, err
	}
	if f.Flags != 0 {
		return nil, fmt.Errorf("felix: unexpected binary frame (flags %#04x)", f.Flags)
	}
	return wire.ParseMessage(f.Payload)
}

// newRequestID returns the next request id (never 0).
func (c *Client) newRequestID() uint64 { return c.nextID.Add(1) }

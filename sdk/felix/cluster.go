package felix

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// ClusterClient talks to a cluster of brokers over one connection per
// broker, shared by every role the broker plays for it: entry point,
// shard owner, redirect target.
//
// Discovery. It connects to the first reachable seed (the entry broker)
// and, when the broker advertises FEATURE_TOPOLOGY, asks it which brokers
// exist; it asks again every TopologyRefresh and after a connection dies.
// The seeds are always kept, so a wrong or stale answer cannot leave it
// worse off. When no address answers, it resolves the host names among
// them again (at most once a second) and tries what is new.
//
// Routing. For each stream and cache it learns the shard count and each
// shard's owner (stream_shards, cache_shards, shard_owners) once, shared
// by concurrent callers, and refreshes that in the background. A keyed
// publish goes to the owner of wire.ShardForKey(key, shards), an unkeyed
// one to shard 0's owner, a cache operation to its key's owner, a
// subscription to its shard's owner. Whatever has no known owner (the
// broker lacks the cluster features, the owner is unavailable, or it is
// being learned) goes through the entry broker, which forwards. A
// refusal of class retry or redirect, a not_leader or a shard_unavailable
// drops the owner it came from and the call runs once more after the
// owners are asked again. A subscribe answered not_leader follows the
// redirect to the broker it names (up to maxRedirects hops).
//
// Failures. A connection that dies fails only its own streams; the next
// call that needs that broker dials it again (concurrent callers share one
// dial). A call whose connection died is retried once when that cannot
// duplicate anything: a call that never left the client, a cache get or
// put, a read, or a subscribe. An acknowledged publish whose answer was
// lost is not re-sent; it fails with a *BrokerError of code internal and
// retry class outcome_unknown. Subscribe and SubscribeFrom return a
// ClusterSubscription, which resumes a durable stream's subscription by
// itself after a lag, a lost connection or a moved shard; on a stream
// without offsets it ends with ErrSubscriptionLost.
//
// Ordering holds per shard while a shard's publishes take one path: when
// the path changes (the owner is learned or moves, a connection is
// replaced) a fire-and-forget publish still in flight on the old path can
// land after one sent on the new. Wait for acknowledgements where that
// matters.
//
// A ClusterClient made by WithIdentity borrows the gateway's connections
// and does not route by owner: its calls go through the gateway's entry
// broker, which forwards them.
type ClusterClient struct {
	seeds []string
	cfg   Config

	// Backoff between failed resubscribes of a ClusterSubscription.
	resumeBase, resumeMax time.Duration

	features atomic.Uint64 // server_features of the last entry connection made

	// id is set on a ClusterClient made by WithIdentity: it borrows the
	// gateway's connections instead of dialing its own.
	id *identity

	owners   *ownerCache // nil on an identity's client
	resolver *resolver   // nil on an identity's client

	ctx      context.Context // ends on Close; background work and shared dials run under it
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	topoKick chan struct{} // one slot: ask the topology again now

	mu      sync.Mutex
	cur     *Client                // the entry connection; nil before the first connect and after a failure
	curIdx  int                    // index in seeds of the entry, or of the last seed tried
	curAddr string                 // address of cur
	conns   map[string]*brokerConn // by address: at most one per broker
	handles map[*Client]*Client    // an identity's handle on each gateway connection
	brokers map[string]string      // node id -> address, from the last topology
	// tcpAddrs maps a broker's address to its TLS-over-TCP address, for
	// the brokers whose topology entry names one (a TCP listener on
	// another port); the others share their address's port.
	tcpAddrs map[string]string
	// serverNames is the TLS name of an address a host name resolved
	// to: the name, not the IP, is what the broker's certificate carries.
	serverNames map[string]string
	closed      bool
}

// Bounds of the cluster client.
const (
	// TopologyRefresh is how often the brokers are asked again.
	TopologyRefresh = 30 * time.Second
	// maxRedirects bounds the not_leader hops of one subscribe.
	maxRedirects = 3
	// dialRetryAfter is how long a failed dial is remembered: calls
	// routed to that broker go through the entry broker meanwhile.
	dialRetryAfter = time.Second
)

// brokerConn is the one connection to one broker, or the dial that makes
// it, which concurrent callers share.
type brokerConn struct {
	done chan struct{} // closed when the dial ended; c and err are set before
	c    *Client
	err  error
	at   time.Time // when the dial ended
	// until, when set, is how long err stands instead of
	// dialRetryAfter: an address whose broker stopped answering a probe.
	until time.Time
}

// failedUntil is when bc's failure stops being remembered.
func (bc *brokerConn) failedUntil() time.Time {
	if !bc.until.IsZero() {
		return bc.until
	}
	return bc.at.Add(dialRetryAfter)
}

// ConnectCluster connects to the first reachable seed, in order, and
// learns the other brokers from it. cfg.Addr is ignored; every other field
// applies to each connection.
func ConnectCluster(ctx context.Context, seeds []string, cfg Config) (*ClusterClient, error) {
	if len(seeds) == 0 {
		return nil, errors.New("felix: ConnectCluster needs at least one seed")
	}
	cc := newClusterClient(seeds, cfg, nil)
	cc.owners = newOwnerCache(cc)
	cc.resolver = newResolver()
	if _, err := cc.client(ctx); err != nil {
		cc.Close()
		return nil, err
	}
	topoCtx, cancel := context.WithTimeout(ctx, ownerAskTimeout)
	cc.refreshTopology(topoCtx)
	cancel()
	cc.wg.Add(1)
	go cc.topologyLoop()
	return cc, nil
}

func newClusterClient(seeds []string, cfg Config, id *identity) *ClusterClient {
	if cfg.auto == nil { // one "auto" choice for every broker's connection
		cfg.auto = &autoChoice{}
	}
	cc := &ClusterClient{seeds: slices.Clone(seeds), cfg: cfg, curIdx: -1, id: id,
		resumeBase: resumeBackoffBase, resumeMax: resumeBackoffMax, topoKick: make(chan struct{}, 1),
		conns: map[string]*brokerConn{}, handles: map[*Client]*Client{}, brokers: map[string]string{},
		serverNames: map[string]string{}}
	cc.ctx, cc.cancel = context.WithCancel(context.Background())
	return cc
}

// Addr returns the address of the entry broker, or "" when not connected.
func (cc *ClusterClient) Addr() string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.cur == nil {
		return ""
	}
	return cc.curAddr
}

// ConnectionsPerNode reports the live connections per broker, named by
// node id when the topology named it and by address otherwise.
func (cc *ClusterClient) ConnectionsPerNode() map[string]int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	names := make(map[string]string, len(cc.brokers))
	for node, addr := range cc.brokers {
		names[addr] = node
	}
	out := map[string]int{}
	for addr, bc := range cc.conns {
		if !bc.ready() || bc.err != nil || bc.c.dead() {
			continue
		}
		name := addr
		if n, ok := names[addr]; ok {
			name = n
		}
		out[name]++
	}
	return out
}

func (bc *brokerConn) ready() bool {
	select {
	case <-bc.done:
		return true
	default:
		return false
	}
}

// client returns the live entry connection, replacing a dead one with a
// connection to the next address that answers: the seeds, starting after
// the one that failed, then the brokers the topology named, then any new
// address their host names resolve to; the address that failed is tried
// last.
func (cc *ClusterClient) client(ctx context.Context) (*Client, error) {
	if cc.id != nil {
		return cc.handleClient(ctx)
	}
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return nil, notSent(ErrClosed)
	}
	if cc.cur != nil && !cc.cur.dead() {
		c := cc.cur
		cc.mu.Unlock()
		return c, nil
	}
	dead := cc.cur
	cands := cc.candidatesLocked()
	if cc.curAddr != "" {
		// The entry that was lost (here or by a concurrent caller) goes
		// last: over QUIC a dead broker does not refuse, it leaves the
		// dial to time out.
		if i := slices.Index(cands, cc.curAddr); i >= 0 {
			cands = append(slices.Delete(cands, i, i+1), cc.curAddr)
		}
	}
	cc.mu.Unlock()
	if dead != nil {
		cc.invalidate(dead)
	}
	var errs []error
	tried := map[string]bool{}
	try := func(addrs []string) *Client {
		for _, addr := range addrs {
			if tried[addr] || ctx.Err() != nil {
				continue
			}
			tried[addr] = true
			c, err := cc.connTo(ctx, addr)
			if err == nil {
				cc.setEntry(c, addr)
				return c
			}
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		}
		return nil
	}
	if c := try(cands); c != nil {
		return c, nil
	}
	if cc.resolver != nil && ctx.Err() == nil {
		found := cc.resolver.resolveAgain(ctx, cands)
		cc.mu.Lock()
		var fresh []string
		for _, res := range found {
			if _, ok := cc.serverNames[res.addr]; !ok && !slices.Contains(cands, res.addr) {
				cc.serverNames[res.addr] = res.host
			}
			fresh = append(fresh, res.addr)
		}
		cc.mu.Unlock()
		if c := try(fresh); c != nil {
			return c, nil
		}
	}
	cc.mu.Lock()
	if cc.curIdx < 0 {
		cc.curIdx = len(cc.seeds) - 1 // the next attempt starts at seed 0 again
	}
	cc.mu.Unlock()
	if len(errs) == 0 {
		// Nothing was tried: the caller's context ended first.
		cause := context.Cause(ctx)
		if cause == nil {
			cause = errors.New("no broker address known")
		}
		return nil, notSent(fmt.Errorf("%w: no broker tried: %w", ErrConnectionLost, cause))
	}
	return nil, notSent(fmt.Errorf("%w: no broker reachable: %w", ErrConnectionLost, errors.Join(errs...)))
}

// candidatesLocked lists the addresses to try for the entry: the seeds,
// starting after the last one used, then the brokers the topology named.
func (cc *ClusterClient) candidatesLocked() []string {
	out := make([]string, 0, len(cc.seeds)+len(cc.brokers))
	for i := 1; i <= len(cc.seeds); i++ {
		out = append(out, cc.seeds[(cc.curIdx+i+len(cc.seeds))%len(cc.seeds)])
	}
	extra := make([]string, 0, len(cc.brokers))
	for _, addr := range cc.brokers {
		if !slices.Contains(out, addr) {
			extra = append(extra, addr)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

// setEntry makes c, the connection to addr, the entry connection.
func (cc *ClusterClient) setEntry(c *Client, addr string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.cur != nil && cc.cur != c && !cc.cur.dead() {
		return // a concurrent caller set a live one first
	}
	cc.cur, cc.curAddr = c, addr
	if i := slices.Index(cc.seeds, addr); i >= 0 {
		cc.curIdx = i
	}
	cc.features.Store(c.ServerFeatures())
}

// spawn runs f on a goroutine Close waits for; false, running nothing,
// once the client is closed.
func (cc *ClusterClient) spawn(f func()) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return false
	}
	cc.wg.Add(1)
	go func() {
		defer cc.wg.Done()
		f()
	}()
	return true
}

// connTo returns the live connection to addr, dialing it when there is
// none. Concurrent callers share one dial, which runs under the
// ClusterClient's own context: a caller that gives up does not fail the
// others. A dial that failed less than dialRetryAfter ago is not retried.
func (cc *ClusterClient) connTo(ctx context.Context, addr string) (*Client, error) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return nil, notSent(ErrClosed)
	}
	bc := cc.conns[addr]
	switch {
	case bc == nil:
	case !bc.ready():
	case bc.err == nil && !bc.c.dead():
		cc.mu.Unlock()
		return bc.c, nil
	case bc.err != nil && time.Now().Before(bc.failedUntil()):
		cc.mu.Unlock()
		return nil, bc.err
	default:
		bc = nil // dead or failed long enough ago: dial again
	}
	var stale *Client
	if bc == nil {
		if old := cc.conns[addr]; old != nil && old.c != nil {
			stale = old.c
		}
		bc = &brokerConn{done: make(chan struct{})}
		cc.conns[addr] = bc
		cc.wg.Add(1)
		go cc.dial(addr, bc)
	}
	cc.mu.Unlock()
	if stale != nil {
		stale.shutdown(ErrSubscriptionLost)
		reconnects.Inc()
	}
	select {
	case <-bc.done:
		return bc.c, bc.err
	case <-ctx.Done():
		return nil, notSent(ctx.Err())
	}
}

// forgetFailedDial drops a remembered failed dial to addr, so that the
// next call to it dials again at once instead of waiting out
// dialRetryAfter. An identity's dials are its gateway's.
func (cc *ClusterClient) forgetFailedDial(addr string) {
	if cc.id != nil {
		cc = cc.id.gateway
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	// A probe's verdict stands (until is set): its broker stopped
	// answering a live connection, so a redirect naming it is stale.
	if bc := cc.conns[addr]; bc != nil && bc.ready() && bc.err != nil && bc.until.IsZero() {
		delete(cc.conns, addr)
	}
}

// dial makes the connection bc waits for.
func (cc *ClusterClient) dial(addr string, bc *brokerConn) {
	defer cc.wg.Done()
	cfg := cc.cfg
	// Every broker is reached at its topology address; over TCP at the
	// address its topology entry names, else the same one (Config.TCPAddr
	// names one broker only).
	cfg.Addr = addr
	cc.mu.Lock()
	cfg.TCPAddr = cc.tcpAddrs[addr]
	if name, ok := cc.serverNames[addr]; ok && cfg.ServerName == "" {
		cfg.ServerName = name
	}
	cc.mu.Unlock()
	c, err := Connect(cc.ctx, cfg)
	cc.mu.Lock()
	if err == nil && cc.closed {
		c.shutdown(ErrClosed)
		c, err = nil, notSent(ErrClosed)
	}
	bc.c, bc.err, bc.at = c, notSent(err), time.Now()
	close(bc.done)
	cc.mu.Unlock()
	if c != nil {
		cc.spawn(func() { cc.watchConn(c) })
	}
}

// watchConn asks for the topology again when c's connection dies (not
// when the client drops it: invalidate does that).
func (cc *ClusterClient) watchConn(c *Client) {
	select {
	case <-c.conn.Context().Done():
		if c.ctx.Err() == nil {
			cc.kickTopology()
		}
	case <-c.ctx.Done():
	case <-cc.ctx.Done():
	}
}

// invalidate drops c, a connection that failed, if it is still the one
// held for its broker; a connection already replaced is left alone, so a
// late report cannot drop its successor.
func (cc *ClusterClient) invalidate(c *Client) {
	if cc.id != nil {
		cc.invalidateHandle(c)
		return
	}
	dropped := cc.drop(c, func() bool {
		found := false
		for addr, bc := range cc.conns {
			if bc.ready() && bc.c == c {
				delete(cc.conns, addr)
				found = true
			}
		}
		return found
	})
	if !dropped {
		return
	}
	reconnects.Inc()
	cc.kickTopology()
}

// drop removes c, a client that failed, with forget (run under cc.mu;
// it reports whether c was still held), stops using it as the entry
// client and, if it was held, shuts it down. It reports whether it was.
func (cc *ClusterClient) drop(c *Client, forget func() bool) bool {
	cc.mu.Lock()
	found := forget()
	if cc.cur == c {
		cc.cur = nil
	}
	cc.mu.Unlock()
	if found {
		c.shutdown(ErrSubscriptionLost)
	}
	return found
}

// do runs op on the entry connection. If it fails because the
// connection is gone, the connection is replaced and op runs once more
// when retry says that is safe.
func (cc *ClusterClient) do(ctx context.Context, retry func(error) bool, op func(*Client) error) error {
	c, err := cc.client(ctx)
	if err != nil {
		return err
	}
	err = op(c)
	if err == nil || !errors.Is(err, ErrConnectionLost) {
		return err
	}
	cc.invalidate(c)
	if !retry(err) {
		return err
	}
	c, err2 := cc.client(ctx)
	if err2 != nil {
		return err2
	}
	return op(c)
}

func always(error) bool { return true }

// SupportsRead is Client.SupportsRead for the last broker connected.
func (cc *ClusterClient) SupportsRead() bool {
	return cc.features.Load()&wire.FeatureStreamRead != 0
}

// SupportsOffsetForTime is Client.SupportsOffsetForTime for the last
// broker connected.
func (cc *ClusterClient) SupportsOffsetForTime() bool {
	return cc.features.Load()&wire.FeatureRecordTimestamps != 0
}

// Finish flushes fire-and-forget publishes on every live connection. It
// does not reconnect. Frames queued on a connection that died are
// reported as failures while that connection is held; once a later call
// has replaced it, they are lost without a report.
func (cc *ClusterClient) Finish(ctx context.Context) error {
	cc.mu.Lock()
	closed := cc.closed
	var live []*Client
	if cc.id != nil {
		for _, h := range cc.handles {
			live = append(live, h)
		}
	} else {
		for _, bc := range cc.conns {
			if bc.ready() && bc.err == nil {
				live = append(live, bc.c)
			}
		}
	}
	cc.mu.Unlock()
	if closed {
		return ErrClosed
	}
	var errs []error
	for _, c := range live {
		errs = append(errs, c.Finish(ctx))
	}
	return errors.Join(errs...)
}

// Close closes every connection and stops the background work; later
// calls return ErrClosed. On an identity's client it ends only that
// identity's streams.
func (cc *ClusterClient) Close() error {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return nil
	}
	cc.closed = true
	var all []*Client
	for _, bc := range cc.conns {
		if bc.ready() && bc.c != nil {
			all = append(all, bc.c)
		}
	}
	for _, h := range cc.handles {
		all = append(all, h)
	}
	cc.conns, cc.handles, cc.cur = map[string]*brokerConn{}, map[*Client]*Client{}, nil
	cc.mu.Unlock()
	cc.cancel()
	for _, c := range all {
		_ = c.Close()
	}
	cc.wg.Wait()
	if cc.resolver != nil {
		cc.resolver.wait()
	}
	return nil
}

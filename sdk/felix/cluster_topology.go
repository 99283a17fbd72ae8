package felix

import (
	"context"
	"net"
	"sync"
	"time"
)

// refreshTopology asks the entry broker which brokers exist and
// remembers them (node id -> address). A broker without FEATURE_TOPOLOGY,
// or one that fails to answer, changes nothing: the seeds stay either way.
func (cc *ClusterClient) refreshTopology(ctx context.Context) {
	c, err := cc.client(ctx)
	if err != nil {
		return
	}
	list, err := c.Topology(ctx)
	if err != nil {
		return
	}
	brokers := make(map[string]string, len(list))
	tcpAddrs := map[string]string{}
	for _, b := range list {
		brokers[b.NodeID] = b.Addr
		if b.TCPAddr != "" {
			tcpAddrs[b.Addr] = b.TCPAddr
		}
	}
	cc.mu.Lock()
	cc.brokers, cc.tcpAddrs = brokers, tcpAddrs
	cc.mu.Unlock()
}

// topologyLoop asks for the topology every TopologyRefresh and when
// kicked, until Close.
func (cc *ClusterClient) topologyLoop() {
	defer cc.wg.Done()
	t := time.NewTicker(TopologyRefresh)
	defer t.Stop()
	for {
		select {
		case <-cc.ctx.Done():
			return
		case <-t.C:
		case <-cc.topoKick:
		}
		ctx, cancel := context.WithTimeout(cc.ctx, ownerAskTimeout)
		cc.refreshTopology(ctx)
		cancel()
	}
}

// kickTopology has the topology asked again soon (a connection died).
func (cc *ClusterClient) kickTopology() {
	select {
	case cc.topoKick <- struct{}{}:
	default:
	}
}

// Brokers returns the brokers the last topology named, node id ->
// address.
func (cc *ClusterClient) Brokers() map[string]string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := make(map[string]string, len(cc.brokers))
	for k, v := range cc.brokers {
		out[k] = v
	}
	return out
}

// Resolution bounds.
const (
	// resolveEvery is how often one host name is looked up again.
	resolveEvery = time.Second
	// resolveTimeout bounds one lookup.
	resolveTimeout = 2 * time.Second
)

// resolver looks host names up again when no address answers. One host's
// lookups are shared by concurrent callers and run at most once per
// resolveEvery; a lookup runs under its own timeout, so a caller that
// gives up does not cancel it for the others.
type resolver struct {
	lookup func(ctx context.Context, host string) ([]string, error) // net.DefaultResolver.LookupHost; tests replace it

	wg sync.WaitGroup // lookups under way

	mu    sync.Mutex
	hosts map[string]*lookupCall
}

// lookupCall is one lookup of one host, shared by its callers.
type lookupCall struct {
	done  chan struct{} // closed when the lookup ended
	addrs []string
	at    time.Time // when it ended
}

// lookupHost is the system lookup; tests replace it.
var lookupHost = net.DefaultResolver.LookupHost

func newResolver() *resolver {
	return &resolver{lookup: lookupHost, hosts: map[string]*lookupCall{}}
}

// resolved is one address a host name resolved to.
type resolved struct {
	addr string // ip:port
	host string // the name it came from: the TLS server name
}

// resolveAgain resolves the host names among addrs (IP literals have
// nothing to resolve) and returns the addresses they name now.
func (r *resolver) resolveAgain(ctx context.Context, addrs []string) []resolved {
	var out []resolved
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || net.ParseIP(host) != nil {
			continue
		}
		for _, ip := range r.resolve(ctx, host) {
			out = append(out, resolved{addr: net.JoinHostPort(ip, port), host: host})
		}
	}
	return out
}

// resolve returns host's addresses: those of a lookup under way or ended
// less than resolveEvery ago, else of a new one.
func (r *resolver) resolve(ctx context.Context, host string) []string {
	r.mu.Lock()
	call := r.hosts[host]
	if call == nil || (isClosed(call.done) && time.Since(call.at) >= resolveEvery) {
		call = &lookupCall{done: make(chan struct{})}
		r.hosts[host] = call
		r.wg.Add(1)
		go r.run(host, call)
	}
	r.mu.Unlock()
	select {
	case <-call.done:
		return call.addrs
	case <-ctx.Done():
		return nil
	}
}

func (r *resolver) run(host string, call *lookupCall) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	addrs, _ := r.lookup(ctx, host)
	r.mu.Lock()
	call.addrs, call.at = addrs, time.Now()
	close(call.done)
	r.mu.Unlock()
}

// wait waits for the lookups under way (each bounded by resolveTimeout).
func (r *resolver) wait() { r.wg.Wait() }

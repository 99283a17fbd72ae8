package felix

import (
	"context"
	"errors"
	"time"
)

// Probing a silent broker. A broker that is killed, frozen or cut off
// says nothing; over QUIC its connection is found dead only once it has
// been silent for the idle timeout (6 s by default), and every call
// routed to it waits that long. So when a call routed to a broker ends
// by the caller's deadline without an answer, the ClusterClient asks
// that connection something cheap (topology) and waits probeTimeout: a
// broker that answers anything is alive (slow, perhaps) and keeps its
// connection; one that does not is dropped at once, as if the
// connection had been lost (its subscriptions resume elsewhere), and its
// address is not dialled again for probeDownFor, so calls routed to it
// go through the entry broker, which forwards them or says who serves
// the shard now. With the Quorum fast path a leader's failover then
// costs a QUIC client about the suspicion delay, not the idle timeout.

// probeTimeout bounds a probe's wait for an answer.
const probeTimeout = 1500 * time.Millisecond

// probeDownFor is how long an address whose probe went unanswered is
// not dialled (a dial to a dead QUIC endpoint waits out its handshake
// timeout).
const probeDownFor = 5 * time.Second

// errProbeUnanswered is the failure remembered for an address whose
// broker did not answer a probe.
var errProbeUnanswered = errors.New("felix: the broker did not answer a liveness probe")

// suspect probes c, the connection a call just timed out on, in the
// background (one probe per connection at a time).
func (cc *ClusterClient) suspect(c *Client) {
	if cc.id != nil {
		if c.parent != nil {
			cc.id.gateway.suspect(c.parent)
		}
		return
	}
	if c.dead() || !c.probing.CompareAndSwap(false, true) {
		return
	}
	if !cc.spawn(func() {
		defer c.probing.Store(false)
		cc.probe(c)
	}) {
		c.probing.Store(false)
	}
}

// probe asks c for the topology and drops c when no answer comes.
func (cc *ClusterClient) probe(c *Client) {
	ctx, cancel := context.WithTimeout(cc.ctx, probeTimeout)
	defer cancel()
	_, err := c.Topology(ctx)
	var be *BrokerError
	if err == nil || errors.As(err, &be) || cc.ctx.Err() != nil || c.dead() {
		return // an answer, a refusal (alive), or nothing left to do
	}
	probesFailed.Inc()
	now := time.Now()
	failed := &brokerConn{done: make(chan struct{}), err: notSent(errProbeUnanswered), at: now, until: now.Add(probeDownFor)}
	close(failed.done)
	// Forget c and mark its address failed in one step, so that no dial
	// to it slips in between (a resume dialling the dead broker over QUIC
	// would hold every caller of that address for the dial's timeout).
	dropped := cc.drop(c, func() bool {
		found := false
		for addr, bc := range cc.conns {
			if bc.ready() && bc.c == c {
				cc.conns[addr] = failed
				found = true
			}
		}
		return found
	})
	if dropped {
		reconnects.Inc()
		cc.kickTopology()
	}
}

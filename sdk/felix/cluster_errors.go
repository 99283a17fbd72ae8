package felix

import (
	"fmt"

	"github.com/felixmq/felix/wire"
)

// NotLeaderError is a broker's refusal of a request for a shard it does
// not own (a subscribe, a cache watch or a read), naming the broker that
// does own it and the generation of that ownership. The client gets it
// as a not_leader answer, since it offers FEATURE_REDIRECT, or as an error
// of code not_leader whose detail names the owner. It unwraps to a
// *BrokerError of code not_leader and retry class redirect. A
// ClusterClient follows it by itself.
type NotLeaderError struct {
	NodeID     string
	Addr       string
	Generation uint64
}

// Error implements error.
func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("felix: this broker does not own the shard; %s at %s does (generation %d)", e.NodeID, e.Addr, e.Generation)
}

// Unwrap returns the refusal as a *BrokerError of code not_leader.
func (e *NotLeaderError) Unwrap() error {
	return &BrokerError{Code: wire.CodeNotLeader, Retry: wire.RetryRedirect, Message: e.Error(),
		Detail: map[string]any{wire.DetailNodeID: e.NodeID, wire.DetailAddr: e.Addr, wire.DetailGeneration: e.Generation}}
}

func notLeaderError(m *wire.NotLeader) *NotLeaderError {
	return &NotLeaderError{NodeID: m.NodeID, Addr: m.Addr, Generation: m.Generation}
}

// brokerErrorFromWire converts a protocol error, recovering a redirect
// from a not_leader error whose detail names the owner.
func brokerErrorFromWire(w *wire.Error) error {
	if nl, ok := wire.NotLeaderFromError(w); ok {
		return notLeaderError(nl)
	}
	return fromWire(w)
}

// ShardMovedError ends a subscription or a cache watch whose shard moved
// to another broker: the old owner sent everything it committed and then
// shard_moved. NodeID and Addr name the new owner when the old one knew
// it ("" otherwise: any broker redirects). ResumeFrom, on a durable
// stream or a log-backed cache, is the first offset the new owner serves
// that this stream did not deliver; resume at max(last delivered + 1,
// ResumeFrom). A ClusterSubscription and a ClusterCacheWatch resume on the
// new owner by themselves. It unwraps to ErrSubscriptionLost, so code
// that handles a lost subscription handles it too.
type ShardMovedError struct {
	Shard      uint32
	NodeID     string
	Addr       string
	Generation uint64
	ResumeFrom *uint64
}

// Error implements error.
func (e *ShardMovedError) Error() string {
	owner := "an owner the old one did not know"
	if e.NodeID != "" {
		owner = e.NodeID + " at " + e.Addr
	}
	if e.ResumeFrom != nil {
		return fmt.Sprintf("felix: shard %d moved to %s (generation %d); resume from offset %d", e.Shard, owner, e.Generation, *e.ResumeFrom)
	}
	return fmt.Sprintf("felix: shard %d moved to %s (generation %d)", e.Shard, owner, e.Generation)
}

// Unwrap returns ErrSubscriptionLost.
func (e *ShardMovedError) Unwrap() error { return ErrSubscriptionLost }

func shardMovedError(m *wire.ShardMoved) *ShardMovedError {
	e := &ShardMovedError{Shard: m.Shard, NodeID: m.NodeID, Addr: m.Addr, Generation: m.Generation}
	if m.ResumeFrom != nil {
		from := *m.ResumeFrom
		e.ResumeFrom = &from
	}
	return e
}

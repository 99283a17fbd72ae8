package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// Routing: the one place a broker decides where a shard's requests go.
// Every request that names a shard (publishes, subscriptions, cache
// operations and watches, reads) asks routeTable.Route; part 2's replica
// role joins here (a Route for a follower copy).
//
// A broker without a cluster view source is standalone: it serves every
// shard itself, generation 0, as before clusters. A broker in a cluster
// routes by the last wire.ClusterView it applied and serves a shard only
// while (1) the view names it the owner and (2) its lease holds: its last
// answered heartbeat was sent less than the control plane's expiry
// timeout ago. The control plane waits that long plus a margin before it
// places the shards of a silent broker elsewhere, so a broker that was
// paused or cut off stops serving before anyone else starts.

// ClusterViewSource is where a broker in a cluster fetches its view: the
// control plane's Service in process, the HTTP catalog source over REST
// (GET /v1/cluster/view?known=TAG). With known equal to the current tag
// it answers changed=false and an empty view.
type ClusterViewSource interface {
	ClusterView(ctx context.Context, known string) (v wire.ClusterView, changed bool, err error)
}

// Reasons a Route is unavailable that the placement does not give: the
// broker has no view yet, or its lease lapsed.
const (
	// unavailableNotReady: this broker cannot tell who owns the shard now
	// (no view yet, or its own lease lapsed). Retry.
	unavailableNotReady = "not_ready"
)

// Route is where one shard's requests go.
//
// Invariant: exactly one of Local, NodeID != "" (another broker owns it)
// and Unavailable != "" holds.
type Route struct {
	// Local: this broker owns the shard and may serve it now.
	Local bool
	// NodeID, Addr and PeerAddr name the owner when another broker owns
	// the shard: its client address and its peer listener.
	NodeID, Addr, PeerAddr string
	// Generation is the ownership's generation (0 standalone).
	Generation uint64
	// Unavailable says why nobody serves the shard now: the placement's
	// not_assigned, owner_down, storage_lost, or not_ready.
	Unavailable string
	// Durable reports whether the assignment is for a durable shard
	// (storage identity set); false standalone.
	Durable bool
}

// Err is the refusal for a request that cannot be served here and is
// not forwarded: not_leader naming the owner, or shard_unavailable with
// the reason. Nil for a local route.
func (r Route) Err(kind wire.ShardKind, name string, shard uint32) *wire.Error {
	switch {
	case r.Local:
		return nil
	case r.NodeID != "":
		return wire.NewError(wire.CodeNotLeader, "%s %s shard %d is served by %s at %s", kind, name, shard, r.NodeID, r.Addr).
			WithDetail("node_id", r.NodeID).WithDetail("addr", r.Addr).WithDetail("generation", r.Generation)
	}
	if r.Unavailable == unavailableNotReady {
		// This broker cannot tell who serves the shard now (no view yet,
		// or its own lease lapsed: it may have been deposed meanwhile);
		// another broker may well be serving it.
		return wire.NewError(wire.CodeShardUnavailable, "%s %s shard %d: this broker cannot serve it or say who does now (no cluster view yet, or its lease lapsed); ask again or ask another broker", kind, name, shard).
			WithDetail(wire.DetailReason, r.Unavailable).WithDetail("generation", r.Generation)
	}
	return wire.NewError(wire.CodeShardUnavailable, "%s %s shard %d is not served by any broker now: %s", kind, name, shard, r.Unavailable).
		WithDetail(wire.DetailReason, r.Unavailable).WithDetail("generation", r.Generation)
}

// shardRef names one shard of a stream or a cache.
type shardRef struct {
	kind             wire.ShardKind
	tenant, ns, name string
	shard            uint32
}

// routeView is one applied cluster view, immutable once published.
type routeView struct {
	tag         string
	assignments map[shardRef]wire.ShardAssignment
	brokers     map[string]wire.Broker // by node id
	topology    []wire.TopologyBroker  // serving brokers with a client address, by node id
}

// routeTable holds the view the broker routes by and its lease.
type routeTable struct {
	self string // this broker's node id
	// storageID is this broker's storage identity ("" when it has none):
	// a durable shard placed on it under another identity is not its to
	// serve (see mine). Set by Start before any view is applied.
	storageID string
	// standalone: no cluster; every shard is local.
	standalone bool

	view atomic.Pointer[routeView] // nil until the first view

	// leaseUntil is when this broker's ownership lapses, in nanoseconds
	// after epoch; meaningful only while leaseKept (the control plane
	// gave an expiry timeout). Lease times are measured with
	// time.Time.Sub against epoch, which uses the monotonic clock
	// readings, so a step of the wall clock neither extends nor cuts the
	// lease.
	leaseUntil atomic.Int64
	leaseKept  atomic.Bool
	epoch      time.Time
	now        func() time.Time

	// mu serializes Apply, so changes are computed against the view they
	// replace.
	mu sync.Mutex
}

func newRouteTable(self string, standalone bool) *routeTable {
	return &routeTable{self: self, standalone: standalone, now: time.Now, epoch: time.Now()}
}

// OwnedShard is a shard whose local ownership changed with a view.
type OwnedShard struct {
	Kind             wire.ShardKind
	Tenant, NS, Name string
	Shard            uint32
	Generation       uint64
	Incarnation      string
	// Durable: the assignment carries a storage identity.
	Durable bool
	// To names the new owner of a lost shard when there is one.
	To wire.ShardAssignment
}

func refOf(a wire.ShardAssignment) shardRef {
	return shardRef{kind: wire.ShardKind(a.Kind), tenant: a.TenantID, ns: a.Namespace, name: a.Name, shard: a.Shard}
}

func ownedOf(a wire.ShardAssignment) OwnedShard {
	return OwnedShard{Kind: wire.ShardKind(a.Kind), Tenant: a.TenantID, NS: a.Namespace, Name: a.Name, Shard: a.Shard,
		Generation: a.Generation, Incarnation: a.Incarnation, Durable: a.StorageID != ""}
}

// Apply makes v the view the broker routes by and returns the shards
// this broker gained and lost with it (a shard whose generation changed
// while it stays here is lost, then gained). Views are applied in the
// order they were fetched (the fetches never overlap), each as it is,
// even one with a lower placement revision (a control plane restored
// from a backup).
func (t *routeTable) Apply(v wire.ClusterView) (gained, lost []OwnedShard) {
	t.mu.Lock()
	defer t.mu.Unlock()
	nv := &routeView{
		tag:         v.Tag,
		assignments: make(map[shardRef]wire.ShardAssignment, len(v.Assignments)),
		brokers:     make(map[string]wire.Broker, len(v.Brokers)),
	}
	for _, b := range v.Brokers {
		nv.brokers[b.NodeID] = b
		if b.State.Serving() && len(b.ClientAddrs) > 0 && b.ClientAddrs[0] != "" {
			nv.topology = append(nv.topology, wire.TopologyBroker{NodeID: b.NodeID, Addr: b.ClientAddrs[0], TCPAddr: b.TCPAddr})
		}
	}
	for _, a := range v.Assignments {
		nv.assignments[refOf(a)] = a
	}
	old := t.view.Load()
	mine := t.mine
	if old != nil {
		for ref, a := range old.assignments {
			if !mine(a) {
				continue
			}
			if b, ok := nv.assignments[ref]; !ok || !mine(b) || b.Generation != a.Generation {
				o := ownedOf(a)
				if ok {
					o.To = b
				}
				lost = append(lost, o)
			}
		}
	}
	for ref, b := range nv.assignments {
		if !mine(b) {
			continue
		}
		if old != nil {
			if a, ok := old.assignments[ref]; ok && mine(a) && a.Generation == b.Generation {
				continue
			}
		}
		gained = append(gained, ownedOf(b))
	}
	t.view.Store(nv)
	return gained, lost
}

// mine reports whether a places its shard on this broker to serve now:
// named the owner, available, and, for a durable shard, under this
// broker's storage identity. A broker that came back under a new identity
// (a wiped directory, or a machine crash that may have cut its logs'
// tails) does not serve, nor lead, nor report the shards placed on the
// one before, until the control plane names it again under the new one:
// it never reopens a shorter log at the old generation.
func (t *routeTable) mine(a wire.ShardAssignment) bool {
	return a.NodeID == t.self && a.Unavailable == "" && !t.otherStorage(a)
}

// otherStorage reports whether durable assignment a names a storage
// identity other than this broker's.
func (t *routeTable) otherStorage(a wire.ShardAssignment) bool {
	return a.StorageID != "" && t.storageID != "" && a.StorageID != t.storageID
}

// Tag is the tag of the view held ("" before the first).
func (t *routeTable) Tag() string {
	if v := t.view.Load(); v != nil {
		return v.tag
	}
	return ""
}

// Renew extends the lease: a heartbeat sent at sent was answered, and
// the control plane gives expiry (0: keep no lease).
//
// Renewals come from one goroutine (the registration task); a later one
// never shortens the lease an earlier one gave.
func (t *routeTable) Renew(sent time.Time, expiry time.Duration) {
	if expiry <= 0 {
		t.leaseKept.Store(false)
		return
	}
	until := int64(sent.Add(expiry).Sub(t.epoch))
	if !t.leaseKept.Load() {
		t.leaseUntil.Store(until)
		t.leaseKept.Store(true)
		return
	}
	for {
		cur := t.leaseUntil.Load()
		if cur >= until || t.leaseUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// leaseHeld reports whether this broker may serve what it owns now.
func (t *routeTable) leaseHeld() bool {
	return !t.leaseKept.Load() || int64(t.now().Sub(t.epoch)) < t.leaseUntil.Load()
}

// leaseExpiry is when the lease lapses (zero when none is kept).
func (t *routeTable) leaseExpiry() time.Time {
	if !t.leaseKept.Load() {
		return time.Time{}
	}
	return t.epoch.Add(time.Duration(t.leaseUntil.Load()))
}

// Route returns where requests for one shard go.
func (t *routeTable) Route(kind wire.ShardKind, tenant, ns, name string, shard uint32) Route {
	if t.standalone {
		return Route{Local: true}
	}
	v := t.view.Load()
	if v == nil {
		return Route{Unavailable: unavailableNotReady}
	}
	a, ok := v.assignments[shardRef{kind: kind, tenant: tenant, ns: ns, name: name, shard: shard}]
	switch {
	case !ok:
		return Route{Unavailable: wire.UnavailableNotAssigned}
	case a.Unavailable != "" || a.NodeID == "":
		r := Route{Unavailable: a.Unavailable, Generation: a.Generation, Durable: a.StorageID != ""}
		if r.Unavailable == "" {
			r.Unavailable = wire.UnavailableNotAssigned
		}
		return r
	case a.NodeID == t.self && t.otherStorage(a):
		return Route{Unavailable: wire.UnavailableStorageLost, Generation: a.Generation, Durable: true}
	case a.NodeID == t.self:
		if !t.leaseHeld() {
			return Route{Unavailable: unavailableNotReady, Generation: a.Generation, Durable: a.StorageID != ""}
		}
		return Route{Local: true, Generation: a.Generation, Durable: a.StorageID != ""}
	}
	r := Route{NodeID: a.NodeID, Generation: a.Generation, Durable: a.StorageID != ""}
	if b, ok := v.brokers[a.NodeID]; ok {
		if len(b.ClientAddrs) > 0 {
			r.Addr = b.ClientAddrs[0]
		}
		r.PeerAddr = b.PeerAddr
	}
	return r
}

// Owners answers shard_owners for a resource of n shards: one entry per
// shard. Standalone, one entry with no node id (the spec's answer of a
// broker not in a cluster).
func (t *routeTable) Owners(kind wire.ShardKind, tenant, ns, name string, n uint32) []wire.ShardOwner {
	if t.standalone {
		return []wire.ShardOwner{{Shard: 0}}
	}
	out := make([]wire.ShardOwner, 0, n)
	for i := range n {
		r := t.Route(kind, tenant, ns, name, i)
		o := wire.ShardOwner{Shard: i, Generation: r.Generation}
		switch {
		case r.Local:
			o.NodeID = t.self
			o.Addr = t.selfAddr()
		case r.NodeID != "" && r.Addr != "":
			o.NodeID, o.Addr = r.NodeID, r.Addr
		case r.NodeID != "":
			o.Unavailable = unavailableNotReady
		default:
			o.Unavailable = r.Unavailable
		}
		if o.NodeID != "" && o.Addr == "" {
			o.NodeID, o.Unavailable = "", unavailableNotReady
		}
		out = append(out, o)
	}
	return out
}

// selfAddr is this broker's client address as the view has it.
func (t *routeTable) selfAddr() string {
	if v := t.view.Load(); v != nil {
		if b, ok := v.brokers[t.self]; ok && len(b.ClientAddrs) > 0 {
			return b.ClientAddrs[0]
		}
	}
	return ""
}

// Topology answers topology: the serving brokers with a client address
// (empty standalone or before the first view).
func (t *routeTable) Topology() []wire.TopologyBroker {
	if v := t.view.Load(); v != nil {
		return v.topology
	}
	return nil
}

// Broker returns a broker's registry record from the view.
func (t *routeTable) Broker(nodeID string) (wire.Broker, bool) {
	if v := t.view.Load(); v != nil {
		b, ok := v.brokers[nodeID]
		return b, ok
	}
	return wire.Broker{}, false
}

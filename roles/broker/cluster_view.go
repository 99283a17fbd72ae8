package broker

import (
	"context"
	"sync"
	"time"

	"github.com/felixmq/felix/wire"
)

// The cluster view: how a broker in a cluster (Deps.Cluster set) keeps
// the view its route table routes by (routes.go).
//
//  1. Start fetches the first view before the listener accepts anything,
//     at most firstViewWait, and waits (within the same bound) until the
//     view shows no placement still pending: a shard whose owner is
//     serving but marked owner_down, or not_assigned while a broker
//     serves. The control plane may be starting: on failure Start logs
//     and goes on, and routes answer not_ready until a view arrives.
//  2. A loop fetches every Config.ClusterViewInterval
//     (FELIX_CLUSTER_VIEW_INTERVAL_MS) with the tag held as known; the
//     source answers "unchanged" cheaply, and a changed view is applied
//     (applyView). Failures are counted and logged, rate-limited, never
//     fatal: the broker routes by the last view it holds meanwhile.
//  3. A request whose shard is not_assigned (the placement may have just
//     placed it), or owner_down, or not_ready before any view, refreshes
//     once before it is answered (Server.route). So does a stream the
//     catalog brings that the view has no assignment for (streamApplied):
//     a create is answered once placed, so a publish right after it finds
//     its shard open.
//
// Every fetch after Start goes through one catalogLookup, so fetches
// never overlap and views are applied in the order they were fetched;
// concurrent refreshes share one fetch and are paced by lookupMinGap.
//
// Lease: every answered registration or heartbeat renews the route
// table's lease (registration.go); a broker whose lease lapsed answers
// not_ready for the shards it owns (routes.go).

// firstViewWait bounds Start's wait for the first view.
const firstViewWait = 5 * time.Second

// firstViewPoll is how often Start asks again while the placement of the
// first view is pending.
const firstViewPoll = 50 * time.Millisecond

// viewErrorLogEvery rate-limits the logging of failed fetches.
const viewErrorLogEvery = 30 * time.Second

// Bounds of FELIX_CLUSTER_VIEW_INTERVAL_MS.
const (
	DefaultClusterViewInterval = 500 * time.Millisecond
	minClusterViewInterval     = 10 * time.Millisecond
	maxClusterViewInterval     = 60 * time.Second
)

// viewState is a broker's view-fetching state.
type viewState struct {
	// lookup serializes and coalesces fetches after Start (nil
	// standalone).
	lookup *catalogLookup

	// soonC asks the polling loop for a fetch now (one coalescing slot):
	// a stream reached the catalog before its placement reached the view.
	soonC chan struct{}

	// mu guards the failure log's rate limit.
	mu sync.Mutex
	// failing: the last fetch failed; loggedAt is when a failure was last
	// logged and suppressed how many were not since.
	failing    bool
	loggedAt   time.Time
	suppressed int
}

// initView prepares the view fetching of a broker in a cluster.
func (s *Server) initView() {
	if s.cluster == nil {
		return
	}
	s.view.lookup = newCatalogLookup(s.fetchView)
	s.view.soonC = make(chan struct{}, 1)
}

// fetchView fetches the view once and applies it when it changed.
func (s *Server) fetchView(ctx context.Context) error {
	v, changed, err := s.cluster.ClusterView(ctx, s.routes.Tag())
	if err != nil {
		s.metrics.viewErrors.Inc()
		s.viewFailed(err)
		return err
	}
	s.viewRecovered()
	if changed {
		s.applyView(v)
		s.metrics.viewsApplied.Inc()
	}
	return nil
}

// viewFailed logs a failed fetch: the first of a run, then at most once
// per viewErrorLogEvery.
func (s *Server) viewFailed(err error) {
	vs := &s.view
	vs.mu.Lock()
	now := time.Now()
	first := !vs.failing
	vs.failing = true
	if !first && now.Sub(vs.loggedAt) < viewErrorLogEvery {
		vs.suppressed++
		vs.mu.Unlock()
		return
	}
	n := vs.suppressed
	vs.loggedAt, vs.suppressed = now, 0
	vs.mu.Unlock()
	s.log.Warn("cannot fetch the cluster view; routing by the last one held", "err", err,
		"tag", s.routes.Tag(), "failures_not_logged", n)
}

// viewRecovered logs the end of a run of failures.
func (s *Server) viewRecovered() {
	vs := &s.view
	vs.mu.Lock()
	was := vs.failing
	vs.failing, vs.suppressed = false, 0
	vs.mu.Unlock()
	if was {
		s.log.Info("fetching the cluster view again")
	}
}

// firstView fetches the first view (see the list above), bounded by
// firstViewWait within ctx. Called by Start before anything runs
// concurrently; applyView must not take s.mu.
func (s *Server) firstView(ctx context.Context) {
	if s.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, firstViewWait)
	defer cancel()
	for {
		err := s.fetchView(ctx)
		// (A source that answers "unchanged" to a broker holding no view
		// has nothing to give: a test's; do not wait for it.)
		if err == nil && (s.routes.view.Load() == nil || s.placementSettled()) {
			s.log.Info("cluster view applied", "tag", s.routes.Tag(), "brokers", len(s.routes.Topology()))
			return
		}
		if ctx.Err() != nil || !sleepCtx(ctx, firstViewPoll) {
			if s.routes.view.Load() == nil {
				s.log.Warn("no cluster view yet; shards answer not_ready until one arrives", "err", err)
			} else {
				s.log.Info("cluster view applied with placement still pending", "tag", s.routes.Tag())
			}
			return
		}
	}
}

// placementSettled reports whether the view held shows no placement the
// control plane is about to make: no shard owned by a serving broker but
// marked owner_down, and none not_assigned while a broker serves.
func (s *Server) placementSettled() bool {
	v := s.routes.view.Load()
	if v == nil {
		return false
	}
	serving := func(id string) bool { b, ok := v.brokers[id]; return ok && b.State.Serving() }
	anyServing := len(v.topology) > 0
	for _, a := range v.assignments {
		switch a.Unavailable {
		case wire.UnavailableOwnerDown:
			if serving(a.NodeID) {
				return false
			}
		case wire.UnavailableNotAssigned:
			if anyServing {
				return false
			}
		}
	}
	return true
}

// ClusterViewWatcher is a ClusterViewSource that can also hold a call
// until the view's tag is not known (the control plane's Service in
// process; the HTTP source, GET /v1/cluster/view/changes): the new tag
// and changed=true, or changed=false once wait passed unchanged.
type ClusterViewWatcher interface {
	WaitClusterViewChange(ctx context.Context, known string, wait time.Duration) (tag string, changed bool, err error)
}

// viewWatchWait is how long one watch call is held; below the HTTP
// source's client timeout.
const viewWatchWait = 5 * time.Second

// startViewLoop runs the polling loop, and the watch loop when the
// source can watch, under bgWG until Shutdown.
func (s *Server) startViewLoop() {
	if s.cluster == nil {
		return
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		s.viewLoop(s.bgCtx)
	}()
	if w, ok := s.cluster.(ClusterViewWatcher); ok {
		s.bgWG.Add(1)
		go func() {
			defer s.bgWG.Done()
			s.watchView(s.bgCtx, w)
		}()
	}
}

// watchView holds a watch call open while the view is unchanged and
// fetches the view (through the one lookup, so views still apply in
// fetch order) as soon as it answers that the tag moved: a placement
// change such as a failover's promotion reaches this broker when the
// control plane member has applied it, not at the next poll. The poll
// stays as the safety net. A failed watch, or a change the fetch did not
// bring (the fetch failed, or this member is ahead of the one fetched
// from), waits one polling interval before the next watch, so the loop
// never spins.
func (s *Server) watchView(ctx context.Context, w ClusterViewWatcher) {
	for ctx.Err() == nil {
		known := s.routes.Tag()
		tag, changed, err := w.WaitClusterViewChange(ctx, known, viewWatchWait)
		switch {
		case err != nil:
		case !changed:
			continue
		default:
			s.metrics.viewWakeups.Inc()
			s.view.lookup.refresh(ctx)
			if s.routes.Tag() == tag {
				continue
			}
		}
		if !sleepCtx(ctx, s.cfg.ClusterViewInterval) {
			return
		}
	}
}

// viewLoop refreshes the view every ClusterViewInterval until ctx ends.
func (s *Server) viewLoop(ctx context.Context) {
	every(ctx, s.cfg.ClusterViewInterval, s.view.soonC, func(time.Time) { s.view.lookup.refresh(ctx) })
}

// refreshView fetches the view now (shared with concurrent callers: see
// catalogLookup.refresh) and reports whether a fetch that started after
// the call succeeded. False standalone.
func (s *Server) refreshView(ctx context.Context) bool {
	if s.view.lookup == nil {
		return false
	}
	return s.view.lookup.refresh(ctx)
}

// streamApplied runs after the catalog applied a stream to the core: a
// stream the view does not place yet (it was just created: the control
// plane answers the create once it is placed, so the placement is there
// to fetch) fetches the view first, so that the request whose catalog
// lookup brought the stream finds its shards open. If the view still
// lacks it (the catalog was read between the create and its placement),
// the polling loop is asked to fetch again at once. Then the shards
// placed here are opened (openOwned).
func (s *Server) streamApplied(spec wire.StreamSpec) {
	if s.cluster != nil && !s.viewPlaces(spec) {
		if !s.refreshView(s.workCtx) || !s.viewPlaces(spec) {
			select {
			case s.view.soonC <- struct{}{}:
			default:
			}
		}
	}
	s.openOwned(spec)
}

// viewPlaces reports whether the view held has an assignment (of any
// state) for shard 0 of spec's incarnation.
func (s *Server) viewPlaces(spec wire.StreamSpec) bool {
	v := s.routes.view.Load()
	if v == nil {
		return false
	}
	a, ok := v.assignments[shardRef{kind: wire.ShardKindStream, tenant: spec.TenantID, ns: spec.Namespace, name: spec.Stream}]
	return ok && (spec.Incarnation == "" || a.Incarnation == spec.Incarnation)
}

// leaseHeld reports felix_broker_lease_held: whether this broker may
// serve what it owns now (always standalone).
func (s *Server) leaseHeld() bool { return s.routes.standalone || s.routes.leaseHeld() }

// route is routes.Route with one on-demand refresh of the view when the
// answer may be out of date: the shard is not_assigned (the placement
// may have just placed it), owner_down (its owner may be back), or
// not_ready because no view has arrived yet. A lapsed lease is not
// refreshed: the heartbeat renews it.
func (s *Server) route(ctx context.Context, kind wire.ShardKind, tenant, ns, name string, shard uint32) Route {
	r := s.routes.Route(kind, tenant, ns, name, shard)
	switch {
	case r.Unavailable == wire.UnavailableNotAssigned, r.Unavailable == wire.UnavailableOwnerDown:
	case r.Unavailable == unavailableNotReady && s.routes.view.Load() == nil:
	default:
		return r
	}
	if !s.refreshView(ctx) {
		return r
	}
	return s.routes.Route(kind, tenant, ns, name, shard)
}

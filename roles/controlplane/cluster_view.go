package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// The cluster view (GET /v1/cluster/view; in process, ClusterView) is
// what a broker routes by: every registered broker and every shard's
// assignment. Brokers poll it every FELIX_CLUSTER_VIEW_INTERVAL_MS with
// the tag they hold, so the unchanged case must stay cheap at 10,000
// shards: it reads the brokers and the placement's revision (no
// assignment is decoded), computes the tag and answers "unchanged". A
// changed view is read whole once and kept, so the other brokers asking
// for the same tag share it.

// ClusterView returns the cluster view, read after a barrier (one
// linearizable read), unless known is its tag: then it returns an empty
// view and changed=false. The view returned may be shared with other
// callers: do not modify it.
//
// The tag covers everything a broker routes by (each broker's node id,
// state, client and peer addresses and storage identity; the placement
// revision; the cluster id) and nothing else, so heartbeats alone leave
// it unchanged; the broker records in a view of an unchanged tag may
// carry older heartbeat times.
func (s *Service) ClusterView(ctx context.Context, known string) (wire.ClusterView, bool, error) {
	id, err := s.ClusterID(ctx)
	if err != nil {
		return wire.ClusterView{}, false, err
	}
	head, err := s.store.ClusterState(ctx, false)
	if err != nil {
		return wire.ClusterView{}, false, err
	}
	tag := viewTag(id, head)
	if known != "" && known == tag {
		return wire.ClusterView{}, false, nil
	}
	if v := s.lastView.Load(); v != nil && v.Tag == tag {
		return *v, true, nil
	}
	full, err := s.store.ClusterState(ctx, true)
	if err != nil {
		return wire.ClusterView{}, false, err
	}
	v := &wire.ClusterView{ClusterID: id, Tag: viewTag(id, full), PlacementRevision: full.Revision,
		Brokers: full.Brokers, Assignments: full.Assignments}
	if v.Brokers == nil {
		v.Brokers = []wire.Broker{}
	}
	if v.Assignments == nil {
		v.Assignments = []wire.ShardAssignment{}
	}
	s.lastView.Store(v)
	if known != "" && known == v.Tag {
		return wire.ClusterView{}, false, nil // it changed and changed back meanwhile
	}
	return *v, true, nil
}

// viewTag hashes what a broker routes by in st.
func viewTag(clusterID string, st catalog.ClusterState) string {
	h := sha256.New()
	put := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	put(clusterID)
	h.Write(binary.BigEndian.AppendUint64(nil, st.Revision))
	for _, b := range st.Brokers {
		put(b.NodeID)
		put(string(b.State))
		h.Write(binary.AppendUvarint(nil, uint64(len(b.ClientAddrs))))
		for _, a := range b.ClientAddrs {
			put(a)
		}
		put(b.PeerAddr)
		put(b.TCPAddr)
		put(b.StorageID)
	}
	return fmt.Sprintf("%d-%x", st.Revision, h.Sum(nil)[:10])
}

// getClusterView serves GET /v1/cluster/view?known=TAG: 200 with the
// view, or 304 without a body when known is its tag.
func (s *Service) getClusterView(r *http.Request, _ *auth.Identity) (int, any, error) {
	known := r.URL.Query().Get("known")
	if len(known) > maxViewTagLen {
		return 0, nil, invalid(fmt.Sprintf("known: longer than %d characters", maxViewTagLen))
	}
	v, changed, err := s.ClusterView(r.Context(), known)
	if err != nil {
		return 0, nil, err
	}
	if !changed {
		return http.StatusNotModified, nil, nil
	}
	return http.StatusOK, v, nil
}

// maxViewTagLen bounds the known parameter (tags are far shorter).
const maxViewTagLen = 128

// MaxViewWait bounds how long WaitClusterViewChange holds a caller.
const MaxViewWait = 20 * time.Second

// WaitClusterViewChange returns as soon as the cluster view's tag is not
// known: the new tag and changed=true. It holds the caller while the tag
// stays known, at most wait (capped at MaxViewWait), then answers
// changed=false; it ends early, unchanged, when the service stops
// (EndWaits). Brokers hold one such call open beside their polling, so
// a placement change (a failover's promotion) reaches every broker as
// soon as this member has applied it, not at the next poll.
//
// The first read is after a barrier, so this member has applied at least
// what the caller's tag was read from; the reads after each change this
// member applies are local. A tag read here is therefore never older
// than the caller's, and "changed" means changed (or changed back).
func (s *Service) WaitClusterViewChange(ctx context.Context, known string, wait time.Duration) (string, bool, error) {
	id, err := s.ClusterID(ctx)
	if err != nil {
		return "", false, err
	}
	ch := s.store.ClusterChanged()
	head, err := s.store.ClusterState(ctx, false)
	if err != nil {
		return "", false, err
	}
	if tag := viewTag(id, head); tag != known {
		return tag, true, nil
	}
	t := time.NewTimer(min(max(wait, 0), MaxViewWait))
	defer t.Stop()
	for {
		select {
		case <-ch:
		case <-t.C:
			return "", false, nil
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-s.waitsDone():
			return "", false, nil
		}
		ch = s.store.ClusterChanged()
		head, err := s.store.LocalClusterState()
		if err != nil {
			return "", false, err
		}
		if tag := viewTag(id, head); tag != known {
			return tag, true, nil
		}
	}
}

// viewChange is GET /v1/cluster/view/changes' answer.
type viewChange struct {
	Tag string `json:"tag"`
}

// getClusterViewChange serves GET
// /v1/cluster/view/changes?known=TAG&wait_ms=N: 200 with the new tag as
// soon as the view's tag is not known, 304 without a body when it still
// is after wait_ms (default 10000, at most MaxViewWait).
func (s *Service) getClusterViewChange(r *http.Request, _ *auth.Identity) (int, any, error) {
	q := r.URL.Query()
	known := q.Get("known")
	if len(known) > maxViewTagLen {
		return 0, nil, invalid(fmt.Sprintf("known: longer than %d characters", maxViewTagLen))
	}
	wait := defaultViewWait
	if v := q.Get("wait_ms"); v != "" {
		ms, err := strconv.ParseUint(v, 10, 32)
		if err != nil || time.Duration(ms)*time.Millisecond > MaxViewWait {
			return 0, nil, invalid(fmt.Sprintf("wait_ms: %q is not a whole number of milliseconds up to %d", v, MaxViewWait.Milliseconds()))
		}
		wait = time.Duration(ms) * time.Millisecond
	}
	tag, changed, err := s.WaitClusterViewChange(r.Context(), known, wait)
	if err != nil {
		return 0, nil, err
	}
	if !changed {
		return http.StatusNotModified, nil, nil
	}
	return http.StatusOK, viewChange{Tag: tag}, nil
}

// defaultViewWait is wait_ms when the request leaves it out.
const defaultViewWait = 10 * time.Second

// waitsDone is closed by EndWaits.
func (s *Service) waitsDone() <-chan struct{} {
	s.endWaits.once.Do(func() { s.endWaits.c = make(chan struct{}) })
	return s.endWaits.c
}

// EndWaits answers every held WaitClusterViewChange at once, and every
// later one without waiting: call it as the service's HTTP server shuts
// down, so that its graceful shutdown is not held by waiting brokers.
func (s *Service) EndWaits() {
	s.waitsDone()
	s.endWaits.close.Do(func() { close(s.endWaits.c) })
}

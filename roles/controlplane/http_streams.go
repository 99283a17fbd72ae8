package controlplane

import (
	"net/http"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// streamPatch is the body of a stream PATCH: the fields that may change
// after creation. Shards is accepted only to refuse it with a clear
// message.
type streamPatch struct {
	Retention      *wire.Retention `json:"retention,omitempty"`
	SubQueuePolicy *string         `json:"sub_queue_policy,omitempty"`
	Shards         *uint32         `json:"shards,omitempty"`
}

func (s *Service) createStream(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace")
	if err != nil {
		return 0, nil, err
	}
	var req streamCreate
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	sp, p := req.newStream()
	p.samePath("tenant_id", sp.TenantID, n[0])
	p.samePath("namespace", sp.Namespace, n[1])
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	sp.TenantID, sp.Namespace = n[0], n[1]
	applyStreamDefaults(&sp, s.defaultRF)
	if err := validateNewStream(sp); err != nil {
		return 0, nil, err
	}
	if err := s.store.CreateStream(r.Context(), sp); err != nil {
		return 0, nil, err
	}
	s.awaitPlaced(r.Context(), placedRef{wire.PlacementStream, sp.TenantID, sp.Namespace, sp.Stream})
	return http.StatusCreated, sp, nil
}

func (s *Service) listStreams(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace")
	if err != nil {
		return 0, nil, err
	}
	if err := s.mustNamespace(r.Context(), n[0], n[1]); err != nil {
		return 0, nil, err
	}
	items, err := s.store.Streams(r.Context(), n[0], n[1])
	return http.StatusOK, listBody[wire.StreamSpec]{Items: items}, err
}

func (s *Service) getStream(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace", "stream")
	if err != nil {
		return 0, nil, err
	}
	sp, ok, err := s.store.Stream(r.Context(), n[0], n[1], n[2])
	return found(sp, ok, err, streamWhat(n[0], n[1], n[2]))
}

// patchStream changes retention and/or the subscriber queue policy. The
// read-modify-write is serialized within this Service; UpdateStream makes
// sure a concurrently deleted stream is not brought back.
func (s *Service) patchStream(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace", "stream")
	if err != nil {
		return 0, nil, err
	}
	var patch streamPatch
	if err := decodeBody(r, &patch); err != nil {
		return 0, nil, err
	}
	var p problems
	if patch.Shards != nil {
		p.add("shards", "cannot be changed after a stream is created")
	}
	if patch.Retention == nil && patch.SubQueuePolicy == nil && patch.Shards == nil {
		p.add("body", "nothing to change: give retention and/or sub_queue_policy")
	}
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sp, ok, err := s.store.Stream(r.Context(), n[0], n[1], n[2])
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return 0, nil, notFound(streamWhat(n[0], n[1], n[2]) + " does not exist")
	}
	if patch.Retention != nil {
		sp.Retention = *patch.Retention
	}
	if patch.SubQueuePolicy != nil {
		sp.SubQueuePolicy = *patch.SubQueuePolicy
	}
	if err := validateStream(sp); err != nil {
		return 0, nil, err
	}
	if err := s.store.UpdateStream(r.Context(), sp); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, sp, nil
}

func (s *Service) deleteStream(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace", "stream")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.store.DeleteStream(r.Context(), n[0], n[1], n[2])
}

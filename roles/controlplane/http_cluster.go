package controlplane

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Bounds of the cluster and revocation routes.
const (
	maxReasonLen   = 512
	maxBatchItems  = 1000
	maxIdemKeyLen  = 128
	idempotencyHdr = "Idempotency-Key"
)

// revocationRequest is the body of a revocation.
type revocationRequest struct {
	Subject string `json:"subject"`
	Reason  string `json:"reason,omitempty"`
}

func (s *Service) createRevocation(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	var req revocationRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	var p problems
	p.subject("subject", req.Subject)
	if len(req.Reason) > maxReasonLen {
		p.add("reason", "%d characters is too long (at most %d)", len(req.Reason), maxReasonLen)
	}
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	rev := wire.Revocation{TenantID: n[0], Subject: req.Subject, RevokedBefore: s.now().Unix(), Reason: req.Reason}
	if err := s.store.PutRevocation(r.Context(), rev); err != nil {
		return 0, nil, err
	}
	s.log.Info("revoked a principal's tokens", "tenant", rev.TenantID, "subject", rev.Subject, "revoked_before", rev.RevokedBefore)
	return http.StatusCreated, rev, nil
}

func (s *Service) listRevocations(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	if err := s.mustTenant(r.Context(), n[0]); err != nil {
		return 0, nil, err
	}
	items, err := s.store.Revocations(r.Context(), n[0])
	return http.StatusOK, listBody[wire.Revocation]{Items: items}, err
}

func (s *Service) deleteRevocation(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	sub := r.PathValue("subject")
	var p problems
	p.subject("subject (path)", sub)
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.store.DeleteRevocation(r.Context(), n[0], sub)
}

// subject checks a token subject: 1-256 bytes without control characters.
func (p *problems) subject(field, v string) {
	switch {
	case v == "":
		p.add(field, "required")
	case len(v) > maxSubjectLen:
		p.add(field, "%d characters is too long (at most %d)", len(v), maxSubjectLen)
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		p.add(field, "holds a control character")
	}
}

// batchRequest is the body of a batch create.
type batchRequest struct {
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	Streams        []streamCreate   `json:"streams,omitempty"`
	Caches         []wire.CacheSpec `json:"caches,omitempty"`
}

// batchResponse answers a batch create.
type batchResponse struct {
	Streams  []wire.StreamSpec `json:"streams"`
	Caches   []wire.CacheSpec  `json:"caches"`
	Replayed bool              `json:"replayed"`
}

func (s *Service) createBatch(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace")
	if err != nil {
		return 0, nil, err
	}
	var req batchRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = r.Header.Get(idempotencyHdr)
	}
	b, err := validateBatch(n[0], n[1], req, s.defaultRF)
	if err != nil {
		return 0, nil, err
	}
	replayed, err := s.store.BatchCreate(r.Context(), b)
	if err != nil {
		return 0, nil, err
	}
	refs := make([]placedRef, 0, len(b.Streams)+len(b.Caches))
	for _, sp := range b.Streams {
		refs = append(refs, placedRef{wire.PlacementStream, sp.TenantID, sp.Namespace, sp.Stream})
	}
	for _, c := range b.Caches {
		refs = append(refs, placedRef{wire.PlacementCache, c.TenantID, c.Namespace, c.Cache})
	}
	s.awaitPlaced(r.Context(), refs...)
	return http.StatusCreated, batchResponse{Streams: b.Streams, Caches: b.Caches, Replayed: replayed}, nil
}

// validateBatch applies defaults (rf: the default replication factor)
// and checks every resource of a batch, reporting every bad field at once.
func validateBatch(tenant, ns string, req batchRequest, rf uint32) (Batch, error) {
	b := Batch{Tenant: tenant, Namespace: ns, IdempotencyKey: req.IdempotencyKey,
		Streams: make([]wire.StreamSpec, 0, len(req.Streams)), Caches: make([]wire.CacheSpec, 0, len(req.Caches))}
	var p problems
	if total := len(req.Streams) + len(req.Caches); total == 0 || total > maxBatchItems {
		p.add("streams, caches", "%d resources; send 1 to %d", total, maxBatchItems)
	}
	if len(b.IdempotencyKey) > maxIdemKeyLen {
		p.add("idempotency_key", "longer than %d characters", maxIdemKeyLen)
	}
	seen := map[string]bool{}
	for i, c := range req.Streams {
		field := fmt.Sprintf("streams[%d]", i)
		sp, sp0 := c.newStream()
		for _, q := range sp0 {
			p = append(p, field+"."+q)
		}
		p.samePath(field+".tenant_id", sp.TenantID, tenant)
		p.samePath(field+".namespace", sp.Namespace, ns)
		sp.TenantID, sp.Namespace = tenant, ns
		applyStreamDefaults(&sp, rf)
		if err := validateNewStream(sp); err != nil {
			p.add(field, "%s", messageOf(err))
		}
		if seen["s/"+sp.Stream] {
			p.add(field+".stream", "%q appears twice", sp.Stream)
		}
		seen["s/"+sp.Stream] = true
		b.Streams = append(b.Streams, sp)
	}
	for i, c := range req.Caches {
		field := fmt.Sprintf("caches[%d]", i)
		p.samePath(field+".tenant_id", c.TenantID, tenant)
		p.samePath(field+".namespace", c.Namespace, ns)
		c.TenantID, c.Namespace = tenant, ns
		if err := validateCache(c); err != nil {
			p.add(field, "%s", messageOf(err))
		}
		if seen["c/"+c.Cache] {
			p.add(field+".cache", "%q appears twice", c.Cache)
		}
		seen["c/"+c.Cache] = true
		b.Caches = append(b.Caches, c)
	}
	return b, p.err()
}

// messageOf is the message of a validation error.
func messageOf(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Message
	}
	return err.Error()
}

// membersBody answers GET /v1/members: the Raft group as the answering
// member sees it.
type membersBody struct {
	ID         uint64       `json:"id"`
	Leader     uint64       `json:"leader"`
	Term       uint64       `json:"term"`
	Commit     uint64       `json:"commit"`
	Applied    uint64       `json:"applied"`
	Role       string       `json:"role"`
	Ready      bool         `json:"ready"`
	CatchingUp bool         `json:"catching_up"`
	Members    []memberBody `json:"members"`
}

type memberBody struct {
	ID     uint64 `json:"id"`
	URL    string `json:"url"`
	Voter  bool   `json:"voter"`
	Leader bool   `json:"leader"`
}

func (s *Service) getMembers(r *http.Request, _ *auth.Identity) (int, any, error) {
	st, err := s.store.ClusterStatus(r.Context())
	if err != nil {
		return 0, nil, err
	}
	body := membersBody{ID: st.ID, Leader: st.Leader, Term: st.Term, Commit: st.Commit, Applied: st.Applied,
		Role: st.Role, Ready: s.store.Ready(), CatchingUp: st.CatchingUp, Members: []memberBody{}}
	for _, m := range st.Members {
		body.Members = append(body.Members, memberBody{ID: m.ID, URL: m.URL, Voter: m.Voter && !m.Learner, Leader: m.ID == st.Leader})
	}
	return http.StatusOK, body, nil
}

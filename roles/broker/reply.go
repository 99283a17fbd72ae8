package broker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// withCodes reports whether errors to this client carry code, retry and
// detail.
func (cs *controlStream) withCodes() bool { return cs.features&wire.FeatureErrorCodes != 0 }

// sendMsg queues a JSON message for the stream's writer. On an ingress
// stream nothing is sent.
func (cs *controlStream) sendMsg(m wire.Message) {
	if cs.out == nil {
		return
	}
	b, err := wire.AppendMessageFrame(nil, m)
	if err != nil {
		cs.srv.log.Error("cannot encode an answer", "type", m.MessageType(), "err", err)
		return
	}
	cs.out.send(cs.ctx, b)
}

// sendError sends an error message, naming requestID when it answers one.
func (cs *controlStream) sendError(e *wire.Error, requestID *uint64) {
	m := e.ErrorMessage(cs.withCodes())
	m.RequestID = requestID
	cs.sendMsg(m)
}

func (cs *controlStream) publishErrorFrame(requestID uint64, e *wire.Error) []byte {
	b, _ := wire.AppendMessageFrame(nil, e.PublishErrorMessage(requestID, cs.withCodes()))
	return b
}

// replyBadRequest answers a frame that did not decode or validate: a
// publish_error for a publish that names its request, an error otherwise.
func (cs *controlStream) replyBadRequest(raw []byte, e *wire.Error) {
	typ, reqID := sniffRequest(raw)
	if reqID != nil && (typ == "publish" || typ == "publish_batch" || typ == "publish_if" || typ == "commit") {
		cs.sendMsg(e.PublishErrorMessage(*reqID, cs.withCodes()))
		return
	}
	cs.sendError(e, reqID)
}

// sniffRequest reads the type and request_id of a JSON object that may not
// decode as its type.
func sniffRequest(raw []byte) (string, *uint64) {
	var head struct {
		Type      string  `json:"type"`
		RequestID *uint64 `json:"request_id"`
	}
	if json.Unmarshal(raw, &head) != nil {
		var typeOnly struct {
			Type string `json:"type"`
		}
		json.Unmarshal(raw, &typeOnly)
		return typeOnly.Type, nil
	}
	return head.Type, head.RequestID
}

// authorize checks the request's tenant and the identity's permission for
// action on resource. Refusals are forbidden (fatal); an identity whose
// token has expired since auth (by the verifier's rule, leeway included,
// the same the control plane applies) is unauthorized.
func (cs *controlStream) authorize(tenant string, action auth.Action, resource string) *wire.Error {
	if cs.srv.verifier.Expired(cs.id) {
		return wire.NewError(wire.CodeUnauthorized, "token expired").WithDetail(wire.DetailReason, wire.ReasonTokenExpired)
	}
	if tenant != cs.id.TenantID {
		return wire.NewError(wire.CodeForbidden, "forbidden: the stream is authenticated for tenant %s, not %s", cs.id.TenantID, tenant).
			WithDetail(wire.DetailReason, wire.ReasonTenantMismatch)
	}
	if cs.id.Perms == nil || !cs.id.Perms.Allows(action, resource) {
		return wire.NewError(wire.CodeForbidden, "forbidden: %s on %s", action, resource)
	}
	return nil
}

// resolveStream finds a stream, answering not_found for it or for its
// tenant or namespace. A miss asks the catalog once before it refuses
// (catalog_lookup.go), so a stream the control plane has acknowledged is
// served at once; a refusal after that lookup says so in its detail.
func (s *Server) resolveStream(tenant, ns, stream string) (*core.Stream, *wire.Error) {
	find := func() (*core.Stream, *wire.Error) {
		if err := s.state.checkNamespace(tenant, ns); err != nil {
			return nil, asWireError(err)
		}
		st, ok := s.core.Stream(core.StreamKey{Tenant: tenant, Namespace: ns, Stream: stream})
		if !ok {
			return nil, wire.NewError(wire.CodeNotFound, "stream not found: tenant=%s namespace=%s stream=%s", tenant, ns, stream).
				WithDetail(wire.DetailReason, wire.ReasonStreamNotFound)
		}
		return st, nil
	}
	return lookAgain(s, wire.KindStreams, find)
}

// resolveCache finds a cache, answering not_found like resolveStream.
func (s *Server) resolveCache(tenant, ns, cache string) (*core.Cache, *wire.Error) {
	find := func() (*core.Cache, *wire.Error) {
		if err := s.state.checkNamespace(tenant, ns); err != nil {
			return nil, asWireError(err)
		}
		c, ok := s.core.Cache(core.CacheKey{Tenant: tenant, Namespace: ns, Cache: cache})
		if !ok {
			return nil, wire.NewError(wire.CodeNotFound, "cache not found: tenant=%s namespace=%s cache=%s", tenant, ns, cache).
				WithDetail(wire.DetailReason, wire.ReasonCacheNotFound)
		}
		return c, nil
	}
	return lookAgain(s, wire.KindCaches, find)
}

// lookAgain runs find, and when it answers not_found asks the catalog for
// kind and runs it once more. A not_found after a lookup that read the
// catalog carries wire.DetailInCatalog false: the name does not exist, so
// a retry will not help (its reason still says what is missing). When the lookup failed (the control plane is out
// of reach) the plain not_found stays, which clients may wait out.
func lookAgain[T any](s *Server, kind wire.CatalogKind, find func() (T, *wire.Error)) (T, *wire.Error) {
	v, e := find()
	if e == nil || e.Code != wire.CodeNotFound || !s.state.askCatalog(s.bgCtx, kind) {
		return v, e
	}
	v, e = find()
	if e != nil && e.Code == wire.CodeNotFound {
		e = e.WithDetail(wire.DetailInCatalog, false)
	}
	return v, e
}

// asWireError converts any error to the *wire.Error a client is sent.
func asWireError(err error) *wire.Error {
	var we *wire.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &we):
		return we
	case errors.Is(err, core.ErrStreamDeleted):
		return wire.NewError(wire.CodeNotFound, "stream deleted").WithDetail(wire.DetailReason, wire.ReasonStreamDeleted)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &wire.Error{Code: wire.CodeDraining, Retry: wire.RetryOutcomeUnknown, Message: "broker is shutting down"}
	default:
		return &wire.Error{Code: wire.CodeInternal, Retry: wire.RetryOutcomeUnknown, Message: err.Error()}
	}
}

// queueFullError is the refusal of a publish that found no room.
func queueFullError() *wire.Error {
	return wire.NewError(wire.CodeOverloaded, "publish queue full; retry in 10 ms").
		WithDetail("reason", "publish_queue_full").
		WithDetail("retry_after_ms", 10)
}

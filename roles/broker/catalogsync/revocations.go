package catalogsync

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/felixmq/felix/wire"
)

// DefaultUnknownKindRetry is how long the Syncer waits before asking
// again for a feed the control plane said it does not serve.
const DefaultUnknownKindRetry = 30 * time.Second

// revocationFeed is the Syncer's view of the revocations feed, which it
// follows on its own cursor after the other kinds. Owned by whoever holds
// the pass token.
type revocationFeed struct {
	unknownAt time.Time // when the control plane last said it lacks the kind
	unknown   bool      // the control plane answered that it lacks the kind
	lastFail  string    // the failure last logged; "" when healthy
}

// syncRevocations brings the revocations feed up to date. It never fails
// the pass: a control plane that does not know the kind means there are
// no revocations (asked again every UnknownKindRetry), and other failures
// are logged and retried on the next pass.
func (s *Syncer) syncRevocations(ctx context.Context) {
	if _, ok := s.apply.(RevocationApplier); !ok {
		return
	}
	f := &s.revs
	now := time.Now()
	if f.unknown && now.Sub(f.unknownAt) < s.unknownKindRetry() {
		return
	}
	applyErrs, err := s.syncKind(ctx, wire.KindRevocations)
	for _, e := range applyErrs {
		s.log.Warn("revocation not applied", "err", e)
	}
	switch {
	case err == nil:
		if f.unknown || f.lastFail != "" {
			s.log.Info("revocations feed synced")
		}
		f.unknown, f.lastFail = false, ""
	case IsUnknownKind(err):
		if !f.unknown {
			s.log.Debug("the control plane does not serve the revocations feed; treating it as empty", "err", err)
		}
		f.unknown, f.unknownAt = true, now
	case ctx.Err() == nil && err.Error() != f.lastFail:
		f.lastFail = err.Error()
		s.log.Warn("revocations feed sync failed; retrying", "err", err)
	}
}

func (s *Syncer) unknownKindRetry() time.Duration {
	if s.UnknownKindRetry > 0 {
		return s.UnknownKindRetry
	}
	return DefaultUnknownKindRetry
}

// IsUnknownKind reports whether err is a control plane's answer that it
// does not serve a catalog kind: HTTP 404 or 400, or a *wire.Error with
// code not_found or invalid_request.
func IsUnknownKind(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status == http.StatusNotFound || se.Status == http.StatusBadRequest
	}
	var we *wire.Error
	return errors.As(err, &we) && (we.Code == wire.CodeNotFound || we.Code == wire.CodeInvalidRequest)
}

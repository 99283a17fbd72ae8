package wire

import (
	"encoding/json"
	"math"
	"time"
)

// Keys of Error.Detail that more than one package reads or writes.
const (
	// DetailReason is a short machine-readable reason, such as
	// ReasonPublishQueueFull.
	DetailReason = "reason"
	// DetailRetryAfterMs is the wait, in whole milliseconds, the sender
	// suggests before a retry_after request is sent again.
	DetailRetryAfterMs = "retry_after_ms"
	// DetailInCatalog, false on a not_found, says the broker asked the
	// control plane's catalog just now and it has no such name either, so
	// waiting will not help (the reason says what is missing).
	DetailInCatalog = "in_catalog"
)

// Reasons carried under DetailReason.
const (
	// ReasonPublishQueueFull: the broker's publish queue had no room for
	// the tenant and nothing was queued (code overloaded).
	ReasonPublishQueueFull = "publish_queue_full"
	// ReasonCacheFull: the cache is at its entry or byte bound (code
	// overloaded).
	ReasonCacheFull = "cache_full"
	// ReasonTokenExpired: the token's exp (plus the verifier's leeway) has
	// passed (code unauthorized).
	ReasonTokenExpired = "token_expired"
	// ReasonTokenNotYetValid: the token's nbf lies ahead even allowing
	// the leeway, so the two clocks disagree (code unauthorized).
	ReasonTokenNotYetValid = "token_not_yet_valid"
	// ReasonTenantMismatch: the token is for another tenant than the one
	// the request names (code unauthorized or forbidden).
	ReasonTenantMismatch = "tenant_mismatch"
	// ReasonTenantNotFound, ReasonNamespaceNotFound, ReasonStreamNotFound
	// and ReasonCacheNotFound: the named resource does not exist (code
	// not_found).
	ReasonTenantNotFound    = "tenant_not_found"
	ReasonNamespaceNotFound = "namespace_not_found"
	ReasonStreamNotFound    = "stream_not_found"
	ReasonCacheNotFound     = "cache_not_found"
	// ReasonStreamDeleted and ReasonCacheDeleted: the resource existed
	// and was deleted while in use (code not_found).
	ReasonStreamDeleted = "stream_deleted"
	ReasonCacheDeleted  = "cache_deleted"
)

// NewOverloaded builds an overloaded error (retry class retry_after) whose
// detail names reason and, when retryAfter is positive, the suggested wait
// in milliseconds (rounded up, so a sub-millisecond wait is never 0).
func NewOverloaded(reason string, retryAfter time.Duration, format string, args ...any) *Error {
	e := NewError(CodeOverloaded, format, args...).WithDetail(DetailReason, reason)
	if retryAfter > 0 {
		ms := (retryAfter + time.Millisecond - 1) / time.Millisecond
		e.WithDetail(DetailRetryAfterMs, uint64(ms))
	}
	return e
}

// Reason returns the detail's reason, or "" when there is none.
func (e *Error) Reason() string {
	s, _ := e.Detail[DetailReason].(string)
	return s
}

// NotInCatalog reports whether a not_found came after the broker asked the
// catalog (DetailInCatalog false), so the name does not exist and waiting
// will not help.
func (e *Error) NotInCatalog() bool {
	in, ok := e.Detail[DetailInCatalog].(bool)
	return ok && !in
}

// RetryAfter returns the wait suggested by the detail's retry_after_ms. It
// accepts every numeric form the detail can hold: Go integers when the
// error was built locally, float64 or json.Number when it was decoded.
func (e *Error) RetryAfter() (time.Duration, bool) {
	ms, ok := detailMillis(e.Detail[DetailRetryAfterMs])
	if !ok {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// maxDetailMillis keeps a suggested wait inside time.Duration's range.
const maxDetailMillis = math.MaxInt64 / int64(time.Millisecond)

func detailMillis(v any) (int64, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, false
		}
		f = x
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case uint32:
		f = float64(n)
	case uint64:
		f = float64(n)
	default:
		return 0, false
	}
	if math.IsNaN(f) || f < 0 {
		return 0, false
	}
	if f >= float64(maxDetailMillis) {
		return maxDetailMillis, true
	}
	return int64(math.Ceil(f)), true
}

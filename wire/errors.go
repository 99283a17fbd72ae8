package wire

import (
	"encoding/json"
	"fmt"
)

// Code is a machine-readable error code carried in error and publish_error
// messages. Clients must tolerate codes they do not know.
type Code string

// The error codes of the protocol.
const (
	CodeUnauthorized     Code = "unauthorized"
	CodeRevoked          Code = "revoked"
	CodeForbidden        Code = "forbidden"
	CodeNotFound         Code = "not_found"
	CodeInvalidRequest   Code = "invalid_request"
	CodeOverloaded       Code = "overloaded"
	CodeShardUnavailable Code = "shard_unavailable"
	CodeNotLeader        Code = "not_leader"
	CodeDraining         Code = "draining"
	CodeQuorumTimeout    Code = "quorum_timeout"
	CodeStaleClaim       Code = "stale_claim"
	CodeStaleWidth       Code = "stale_width"
	CodeOffsetMismatch   Code = "offset_mismatch"
	CodeUnsupported      Code = "unsupported"
	CodeInternal         Code = "internal"
)

// Codes lists every code in the order of the specification's table.
var Codes = []Code{
	CodeUnauthorized, CodeRevoked, CodeForbidden, CodeNotFound, CodeInvalidRequest,
	CodeOverloaded, CodeShardUnavailable, CodeNotLeader, CodeDraining, CodeQuorumTimeout,
	CodeStaleClaim, CodeStaleWidth, CodeOffsetMismatch, CodeUnsupported, CodeInternal,
}

// RetryClass says whether a refused request may have been applied and
// whether it is worth sending again.
type RetryClass string

// Retry classes.
const (
	RetryFatal          RetryClass = "fatal"           // do not retry as is
	RetryRetry          RetryClass = "retry"           // not applied; retry now
	RetryRetryAfter     RetryClass = "retry_after"     // not applied; retry after a wait
	RetryRedirect       RetryClass = "redirect"        // not applied; retry elsewhere
	RetryOutcomeUnknown RetryClass = "outcome_unknown" // may have been applied
)

// Retryable reports whether a refusal of class r promises that nothing was
// applied and that sending the request again may work: retry, retry_after
// and redirect (the spec's "Only retry, retry_after and redirect say
// nothing was applied"). fatal will fail the same way again, and
// outcome_unknown may already have taken effect; an unknown class is
// neither. Code that decides whether to retry asks this of the error's
// class, never of its code, so a sender's explicit class and codes this
// version does not know are honoured.
func (r RetryClass) Retryable() bool {
	switch r {
	case RetryRetry, RetryRetryAfter, RetryRedirect:
		return true
	default:
		return false
	}
}

// DefaultRetry is the retry class a code carries unless the sender says
// otherwise. overloaded and not_found ask for a wait first; shard_unavailable
// and draining were refused before anything was applied and may be sent
// again at once (elsewhere, for draining); stale_width and stale_claim are
// retried after the client refreshes what it knows. An unknown code is
// fatal.
func DefaultRetry(c Code) RetryClass {
	switch c {
	case CodeOverloaded, CodeNotFound:
		return RetryRetryAfter
	case CodeShardUnavailable, CodeDraining, CodeStaleWidth, CodeStaleClaim:
		return RetryRetry
	case CodeNotLeader:
		return RetryRedirect
	case CodeQuorumTimeout, CodeInternal:
		return RetryOutcomeUnknown
	default:
		return RetryFatal
	}
}

// Error is a protocol error: a code, its retry class, a human message and
// optional structured detail. It is both the Go error the broker returns
// internally and what travels in error / publish_error messages.
type Error struct {
	Code    Code
	Retry   RetryClass
	Message string
	Detail  map[string]any
}

// NewError builds an Error with the code's default retry class.
func NewError(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Retry: DefaultRetry(code), Message: fmt.Sprintf(format, args...)}
}

// WithDetail returns e with detail key k set to v.
func (e *Error) WithDetail(k string, v any) *Error {
	if e.Detail == nil {
		e.Detail = map[string]any{}
	}
	e.Detail[k] = v
	return e
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same code, so
// errors.Is(err, &wire.Error{Code: wire.CodeOverloaded}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ErrorMessage converts e to the JSON error message. Without
// FEATURE_ERROR_CODES negotiated, only type and message are sent. With it,
// an empty code is sent as internal and an empty retry class as the code's
// default, so a peer always gets both.
func (e *Error) ErrorMessage(withCodes bool) *ErrorMsg {
	code := e.Code
	if code == "" {
		code = CodeInternal
	}
	m := &ErrorMsg{Message: e.Message}
	if m.Message == "" {
		m.Message = string(code)
	}
	if withCodes {
		m.Code, m.Retry = code, e.Retry
		if m.Retry == "" {
			m.Retry = DefaultRetry(code)
		}
		m.Detail = detailJSON(e.Detail)
	}
	return m
}

// PublishErrorMessage converts e to a publish_error for request id.
func (e *Error) PublishErrorMessage(requestID uint64, withCodes bool) *PublishError {
	em := e.ErrorMessage(withCodes)
	return &PublishError{RequestID: requestID, Message: em.Message, Code: em.Code, Retry: em.Retry, Detail: em.Detail}
}

func detailJSON(d map[string]any) json.RawMessage {
	if d == nil {
		return nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil
	}
	return b
}

// ErrorFromFields rebuilds an *Error from the fields of an error or
// publish_error message. A missing retry class falls back to the code's
// default; a missing code is reported as internal.
func ErrorFromFields(code Code, retry RetryClass, message string, detail json.RawMessage) *Error {
	if code == "" {
		code = CodeInternal
	}
	if retry == "" {
		retry = DefaultRetry(code)
	}
	e := &Error{Code: code, Retry: retry, Message: message}
	if len(detail) > 0 && string(detail) != "null" {
		var d map[string]any
		if json.Unmarshal(detail, &d) == nil {
			e.Detail = d
		}
	}
	return e
}

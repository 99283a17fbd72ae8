package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// pinnedCodes is the error code list of spec/protocol-pins.md, in its order.
var pinnedCodes = []string{
	"unauthorized", "revoked", "forbidden", "not_found", "invalid_request",
	"overloaded", "shard_unavailable", "not_leader", "draining", "quorum_timeout",
	"stale_claim", "stale_width", "offset_mismatch", "unsupported", "internal",
}

func TestCodesMatchPins(t *testing.T) {
	if len(Codes) != len(pinnedCodes) {
		t.Fatalf("Codes has %d entries, the pins list %d", len(Codes), len(pinnedCodes))
	}
	seen := map[Code]bool{}
	for i, c := range Codes {
		if string(c) != pinnedCodes[i] {
			t.Errorf("Codes[%d] = %q, pins say %q", i, c, pinnedCodes[i])
		}
		if seen[c] {
			t.Errorf("code %q listed twice", c)
		}
		seen[c] = true
	}
}

func TestEveryCodeHasRetryClass(t *testing.T) {
	classes := map[RetryClass]bool{RetryFatal: true, RetryRetry: true, RetryRetryAfter: true, RetryRedirect: true, RetryOutcomeUnknown: true}
	for _, name := range []string{"fatal", "retry", "retry_after", "redirect", "outcome_unknown"} {
		if !classes[RetryClass(name)] {
			t.Errorf("retry class %q has no constant", name)
		}
	}
	want := map[Code]RetryClass{
		CodeUnauthorized:     RetryFatal,
		CodeRevoked:          RetryFatal,
		CodeForbidden:        RetryFatal,
		CodeNotFound:         RetryRetryAfter,
		CodeInvalidRequest:   RetryFatal,
		CodeOverloaded:       RetryRetryAfter,
		CodeShardUnavailable: RetryRetry,
		CodeNotLeader:        RetryRedirect,
		CodeDraining:         RetryRetry,
		CodeQuorumTimeout:    RetryOutcomeUnknown,
		CodeStaleClaim:       RetryRetry,
		CodeStaleWidth:       RetryRetry,
		CodeOffsetMismatch:   RetryFatal,
		CodeUnsupported:      RetryFatal,
		CodeInternal:         RetryOutcomeUnknown,
	}
	for _, c := range Codes {
		got := DefaultRetry(c)
		if !classes[got] {
			t.Errorf("code %q has retry class %q, not one of the five", c, got)
		}
		if w, ok := want[c]; !ok || got != w {
			t.Errorf("DefaultRetry(%q) = %q, want %q", c, got, w)
		}
	}
	if got := DefaultRetry("something_new"); got != RetryFatal {
		t.Errorf("unknown code defaults to %q", got)
	}
}

func TestErrorMessageWithoutCodes(t *testing.T) {
	e := NewError(CodeOverloaded, "queue full").WithDetail("reason", "publish_queue_full")
	b, err := MarshalMessage(e.ErrorMessage(false))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	if len(fields) != 2 || fields["type"] != "error" || fields["message"] != "queue full" {
		t.Fatalf("error without codes = %s, want only type and message", b)
	}
	// An empty message falls back to the code's name.
	b, _ = MarshalMessage((&Error{Code: CodeForbidden}).ErrorMessage(false))
	if string(b) != `{"type":"error","message":"forbidden"}` {
		t.Fatalf("empty message: %s", b)
	}
	pe := e.PublishErrorMessage(9, false)
	b, _ = MarshalMessage(pe)
	if string(b) != `{"type":"publish_error","request_id":9,"message":"queue full"}` {
		t.Fatalf("publish_error without codes: %s", b)
	}
}

func TestErrorMessageWithCodes(t *testing.T) {
	e := NewOverloaded(ReasonPublishQueueFull, 10*time.Millisecond, "publish queue full; retry in %d ms", 10)
	m := e.ErrorMessage(true)
	b, err := MarshalMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"error","message":"publish queue full; retry in 10 ms","code":"overloaded","retry":"retry_after","detail":{"reason":"publish_queue_full","retry_after_ms":10}}`
	if string(b) != want {
		t.Fatalf("overloaded error\n got  %s\n want %s", b, want)
	}
	parsed, err := ParseMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	back := parsed.(*ErrorMsg).Err()
	if back.Code != CodeOverloaded || back.Retry != RetryRetryAfter || back.Reason() != ReasonPublishQueueFull {
		t.Fatalf("decoded %+v", back)
	}
	if d, ok := back.RetryAfter(); !ok || d != 10*time.Millisecond {
		t.Fatalf("RetryAfter = %v, %v", d, ok)
	}

	pe := NewError(CodeNotFound, "stream not found").PublishErrorMessage(3, true)
	b, _ = MarshalMessage(pe)
	if string(b) != `{"type":"publish_error","request_id":3,"message":"stream not found","code":"not_found","retry":"retry_after"}` {
		t.Fatalf("publish_error with codes: %s", b)
	}
	back = pe.Err()
	if back.Code != CodeNotFound || back.Retry != RetryRetryAfter || back.Detail != nil {
		t.Fatalf("publish_error back: %+v", back)
	}

	// A hand-built error without a retry class or code still sends both.
	m = (&Error{Code: CodeNotLeader, Message: "x"}).ErrorMessage(true)
	if m.Retry != RetryRedirect {
		t.Fatalf("empty retry sent as %q", m.Retry)
	}
	m = (&Error{Message: "x"}).ErrorMessage(true)
	if m.Code != CodeInternal || m.Retry != RetryOutcomeUnknown {
		t.Fatalf("empty code sent as %q/%q", m.Code, m.Retry)
	}
	// An explicit retry class wins over the default.
	m = (&Error{Code: CodeInternal, Retry: RetryRetry}).ErrorMessage(true)
	if m.Retry != RetryRetry || m.Message != "internal" {
		t.Fatalf("explicit retry: %+v", m)
	}
}

func TestErrorFromFields(t *testing.T) {
	e := ErrorFromFields("", "", "boom", nil)
	if e.Code != CodeInternal || e.Retry != RetryOutcomeUnknown {
		t.Fatalf("missing code: %+v", e)
	}
	e = ErrorFromFields("brand_new_code", "", "x", json.RawMessage(`null`))
	if e.Code != "brand_new_code" || e.Retry != RetryFatal || e.Detail != nil {
		t.Fatalf("unknown code: %+v", e)
	}
	e = ErrorFromFields(CodeShardUnavailable, "", "x", json.RawMessage(`{"reason":"not_ready"}`))
	if e.Retry != RetryRetry || e.Reason() != "not_ready" {
		t.Fatalf("shard_unavailable: %+v", e)
	}
	e = ErrorFromFields(CodeOverloaded, RetryRetry, "x", json.RawMessage(`[1]`))
	if e.Retry != RetryRetry || e.Detail != nil {
		t.Fatalf("non-object detail: %+v", e)
	}
}

func TestErrorIsAndAs(t *testing.T) {
	err := fmt.Errorf("publishing: %w", NewError(CodeForbidden, "no"))
	if !errors.Is(err, &Error{Code: CodeForbidden}) {
		t.Fatal("errors.Is by code failed")
	}
	if errors.Is(err, &Error{Code: CodeNotFound}) {
		t.Fatal("errors.Is matched another code")
	}
	var we *Error
	if !errors.As(err, &we) || we.Message != "no" || we.Error() != "forbidden: no" {
		t.Fatalf("errors.As: %+v", we)
	}
	if (&Error{Code: CodeInternal}).Error() != "internal" {
		t.Fatal("Error() without a message")
	}
}

func TestRetryAfterForms(t *testing.T) {
	cases := []struct {
		v    any
		want time.Duration
		ok   bool
	}{
		{float64(10), 10 * time.Millisecond, true},
		{float64(2.5), 3 * time.Millisecond, true},
		{json.Number("7"), 7 * time.Millisecond, true},
		{uint64(5), 5 * time.Millisecond, true},
		{int(4), 4 * time.Millisecond, true},
		{int64(0), 0, true},
		{float64(-1), 0, false},
		{"10", 0, false},
		{nil, 0, false},
		{json.Number("x"), 0, false},
		{float64(1e300), time.Duration(maxDetailMillis) * time.Millisecond, true},
	}
	for _, c := range cases {
		e := &Error{Code: CodeOverloaded, Detail: map[string]any{DetailRetryAfterMs: c.v}}
		got, ok := e.RetryAfter()
		if got != c.want || ok != c.ok {
			t.Errorf("retry_after_ms %#v: %v, %v; want %v, %v", c.v, got, ok, c.want, c.ok)
		}
	}
	if _, ok := (&Error{}).RetryAfter(); ok {
		t.Error("no detail reported a wait")
	}
	// A sub-millisecond wait is rounded up, never sent as 0.
	e := NewOverloaded(ReasonCacheFull, time.Microsecond, "full")
	if e.Detail[DetailRetryAfterMs] != uint64(1) || e.Retry != RetryRetryAfter {
		t.Errorf("sub-millisecond wait: %+v", e)
	}
	if _, ok := NewOverloaded(ReasonCacheFull, 0, "full").Detail[DetailRetryAfterMs]; ok {
		t.Error("zero wait still sent")
	}
}

// TestRetryableFollowsClass checks Retryable is a property of the class
// alone: exactly the classes the spec says applied nothing.
func TestRetryableFollowsClass(t *testing.T) {
	for class, want := range map[RetryClass]bool{
		RetryFatal: false, RetryRetry: true, RetryRetryAfter: true, RetryRedirect: true,
		RetryOutcomeUnknown: false, "": false, "some_new_class": false,
	} {
		if got := class.Retryable(); got != want {
			t.Errorf("RetryClass(%q).Retryable() = %v, want %v", class, got, want)
		}
	}
}

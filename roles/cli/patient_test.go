package cli

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// TestPatientRetriesByClass refuses the first two attempts with a code
// and an explicit retry class and checks the request is tried again
// exactly when the class says it was not applied and this broker may take
// it later (retry, retry_after), whatever the code.
func TestPatientRetriesByClass(t *testing.T) {
	for _, tc := range []struct {
		code  wire.Code
		retry wire.RetryClass
		wait  bool
	}{
		{wire.CodeNotFound, wire.RetryRetryAfter, true},
		{wire.CodeOverloaded, wire.RetryRetryAfter, true},
		{wire.CodeShardUnavailable, wire.RetryRetry, true},
		{wire.CodeInvalidRequest, wire.RetryRetry, true}, // usually fatal
		{"some_new_code", wire.RetryRetryAfter, true},
		{wire.CodeNotFound, wire.RetryFatal, false}, // usually retry_after
		{wire.CodeNotLeader, wire.RetryRedirect, false},
		{wire.CodeInternal, wire.RetryOutcomeUnknown, false},
		{wire.CodeShardUnavailable, wire.RetryOutcomeUnknown, false},
		{wire.CodeForbidden, wire.RetryFatal, false},
		{"some_new_code", wire.RetryFatal, false},
	} {
		t.Run(string(tc.code)+"/"+string(tc.retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				refusal := &felix.BrokerError{Code: tc.code, Retry: tc.retry, Message: "refused"}
				calls := 0
				v, err := retryPatiently(context.Background(), func() (int, error) {
					calls++
					if calls <= 2 {
						return 0, refusal
					}
					return 42, nil
				})
				if tc.wait {
					if err != nil || v != 42 || calls != 3 {
						t.Fatalf("got %d, %v after %d calls; want 42 after 3", v, err, calls)
					}
					return
				}
				if !errors.Is(err, refusal) || calls != 1 {
					t.Fatalf("got %v after %d calls; want the refusal after 1", err, calls)
				}
			})
		})
	}
}

// TestPatientGivesUpAndHonoursWaits checks a refusal that keeps coming is
// returned once catalogWait has passed (the last attempt at that
// moment), that a suggested retry_after_ms
// spaces the attempts out, and that a connection-level error or an ended
// context stops the retries at once.
func TestPatientGivesUpAndHonoursWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refusal := &felix.BrokerError{Code: wire.CodeOverloaded, Retry: wire.RetryRetryAfter,
			Detail: map[string]any{wire.DetailRetryAfterMs: float64(1000)}}
		start := time.Now()
		var at []time.Duration
		_, err := retryPatiently(context.Background(), func() (int, error) {
			at = append(at, time.Since(start))
			if len(at) > 100 {
				return 0, errors.New("too many attempts")
			}
			return 0, refusal
		})
		if !errors.Is(err, refusal) {
			t.Fatalf("got %v after attempts at %v, want the refusal", err, at)
		}
		if len(at) != 6 || at[1] != time.Second || at[5] != catalogWait {
			t.Fatalf("attempts at %v; want one a second, the last at %v", at, catalogWait)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := retryPatientlyErr(context.Background(), func() error {
			calls++
			return felix.ErrConnectionLost
		})
		if !errors.Is(err, felix.ErrConnectionLost) || calls != 1 {
			t.Fatalf("got %v after %d calls", err, calls)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := retryPatientlyErr(ctx, func() error {
			calls++
			cancel()
			return &felix.BrokerError{Code: wire.CodeNotFound, Retry: wire.RetryRetryAfter}
		})
		if err == nil || calls != 1 {
			t.Fatalf("got %v after %d calls", err, calls)
		}
	})
}

package controlplane

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/felixmq/felix/raftmeta"
	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// TestRaftStoreRetriesByClass checks the store re-tries a failed proposal
// or read barrier exactly when the error's retry class says nothing was
// applied, whatever its code: a code's usual class, or a code this
// version does not know, does not decide it.
func TestRaftStoreRetriesByClass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{wire.NewError(wire.CodeShardUnavailable, "no leader"), true},
		{wire.NewError(wire.CodeOverloaded, "too many in flight"), true},
		{wire.NewError(wire.CodeNotLeader, "not the leader"), true},
		{&wire.Error{Code: wire.CodeInvalidRequest, Retry: wire.RetryRetry}, true}, // usually fatal
		{&wire.Error{Code: "some_new_code", Retry: wire.RetryRetryAfter}, true},
		{fmt.Errorf("attempt: %w", wire.NewError(wire.CodeShardUnavailable, "wrapped")), true},
		{&wire.Error{Code: wire.CodeShardUnavailable, Retry: wire.RetryFatal}, false}, // usually retry
		{&wire.Error{Code: wire.CodeOverloaded, Retry: wire.RetryOutcomeUnknown}, false},
		{wire.NewError(wire.CodeQuorumTimeout, "not confirmed"), false},
		{wire.NewError(wire.CodeInvalidRequest, "bad"), false},
		{&wire.Error{Code: "some_new_code", Retry: wire.RetryFatal}, false},
		{&catalog.CatalogError{Kind: catalog.ErrNotFound, Msg: "no tenant"}, false},
		{raftmeta.ErrClosed, false},
		{context.DeadlineExceeded, false},
		{errors.New("disk on fire"), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

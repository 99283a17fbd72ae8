package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// TestHintFollowsCause renders every (code, reason) pair the broker and
// the control plane send and checks that the hint names the cause's own
// next step, and none of the advice meant for another cause.
func TestHintFollowsCause(t *testing.T) {
	cases := []struct {
		code, reason string
		want         string   // the hint holds this
		not          []string // and none of these
	}{
		// broker and control plane: credentials
		{"unauthorized", wire.ReasonTokenExpired, "the token has expired; get a new one", nil},
		{"unauthorized", wire.ReasonTokenNotYetValid, "clock", []string{"expired"}},
		{"unauthorized", wire.ReasonTenantMismatch, "the token is for another tenant", []string{"expired"}},
		{"forbidden", wire.ReasonTenantMismatch, "--tenant TENANT", []string{"expired", "--perms"}},
		{"unauthorized", "", "check the token file", []string{"expired"}},
		{"revoked", "", "revoked; get a new one", nil},
		{"forbidden", "", "--perms", nil},
		// broker: what a request names
		{"not_found", wire.ReasonTenantNotFound, "felix admin tenant create", []string{"stream", "catalog sync"}},
		{"not_found", wire.ReasonNamespaceNotFound, "felix admin namespace create", []string{"stream", "catalog sync"}},
		{"not_found", wire.ReasonStreamNotFound, "felix admin stream create", []string{"cache", "catalog sync"}},
		{"not_found", wire.ReasonCacheNotFound, "felix admin cache create", []string{"stream", "catalog sync"}},
		{"not_found", wire.ReasonStreamDeleted, "was deleted", []string{"create it first", "cache"}},
		{"not_found", wire.ReasonCacheDeleted, "was deleted", []string{"create it first", "stream"}},
		{"not_found", "", "create it first", []string{"catalog sync"}}, // the control plane's REST 404
		// broker: limits
		{"overloaded", wire.ReasonCacheFull, "--max-entries", []string{"busy", "retry later"}},
		{"overloaded", wire.ReasonPublishQueueFull, "publish queue", nil},
		{"overloaded", "storage_full", "disk is full", []string{"retry later"}},
		{"overloaded", "subscription_limit", "subscriptions", []string{"retry later"}},
		{"overloaded", "block_wait_ended", "not keeping up", nil},
		{"overloaded", "", "busy", nil},
		{"invalid_request", "value_too_large", "--max-bytes", nil},
		{"invalid_request", "shard_out_of_range", "fewer shards", nil},
		{"invalid_request", "not_durable", "--durable", nil},
		{"shard_unavailable", "log_corrupt", "felix inspect segments", nil},
		{"shard_unavailable", "log_failed", "log", nil},
		{"shard_unavailable", "log_unavailable", "log", nil},
		{"draining", "", "shutting down", nil},
		{"draining", "abandoned", "shutting down", nil},
		// control plane
		{"quorum_timeout", "", "quorum", nil},
		{codeConflict, "", "conflicts", nil},
	}
	for _, tc := range cases {
		for _, err := range sentAs(tc.code, tc.reason) {
			msg := exitError(err).Error()
			_, h, ok := strings.Cut(msg, "\nhint: ")
			if !ok {
				t.Errorf("%s/%s as %T: no hint in %q", tc.code, tc.reason, err, msg)
				continue
			}
			if !strings.Contains(h, tc.want) {
				t.Errorf("%s/%s as %T: hint %q lacks %q", tc.code, tc.reason, err, h, tc.want)
			}
			for _, n := range tc.not {
				if strings.Contains(h, n) {
					t.Errorf("%s/%s as %T: hint %q speaks of %q", tc.code, tc.reason, err, h, n)
				}
			}
		}
	}
}

// sentAs is the error as each path delivers it: the SDK's BrokerError
// (wrapped, as commands wrap it), the control plane's APIError, and a bare
// wire.Error.
func sentAs(code, reason string) []error {
	var detail map[string]any
	if reason != "" {
		detail = map[string]any{wire.DetailReason: reason}
	}
	we := &wire.Error{Code: wire.Code(code), Message: "refused", Detail: detail}
	return []error{
		fmt.Errorf("publish: %w", &felix.BrokerError{Code: wire.Code(code), Message: "refused", Detail: detail}),
		&APIError{Status: 400, Code: code, Message: "refused", Reason: reason},
		we,
	}
}

// TestUnknownReasonFallsBackToCode keeps a reason this version does not
// know from losing the code's hint.
func TestUnknownReasonFallsBackToCode(t *testing.T) {
	err := &felix.BrokerError{Code: wire.CodeOverloaded, Detail: map[string]any{"reason": "from_the_future"}}
	if h := hintFor(err, "overloaded"); h != hints[hintKey{"overloaded", ""}] {
		t.Fatalf("hint %q", h)
	}
}

package cli

import (
	"errors"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// codeBrokerUnreachable labels a broker that did not answer the QUIC
// handshake; like codeUnreachable it picks a hint and is not printed.
const codeBrokerUnreachable = "broker_unreachable"

// hintKey is what a hint follows: the error's code and, where the
// sender gave one, the reason in its detail.
type hintKey struct {
	code   string
	reason string
}

// hints holds one line of advice per cause, each naming the next step.
// A (code, reason) pair is looked up first, then (code, "") as the
// code's fallback for reasons it does not list.
var hints = map[hintKey]string{
	{string(wire.CodeUnauthorized), wire.ReasonTokenExpired}: "the token has expired; get a new one (felix admin token create, " +
		"or the admin.token that felix serve writes in its --data-dir)",
	{string(wire.CodeUnauthorized), wire.ReasonTokenNotYetValid}: "the token is not valid yet: this host's clock and the control plane's disagree " +
		"by more than the leeway; check both clocks (NTP)",
	{string(wire.CodeUnauthorized), wire.ReasonTenantMismatch}: tenantMismatchHint,
	{string(wire.CodeForbidden), wire.ReasonTenantMismatch}:    tenantMismatchHint,
	{string(wire.CodeUnauthorized), ""}: "check the token file (--token-file / FELIX_TOKEN_FILE): it must be a token " +
		"this cluster's control plane signed (felix admin token create)",
	{string(wire.CodeRevoked), ""}:   "the token was revoked; get a new one (felix admin token create)",
	{string(wire.CodeForbidden), ""}: "the token lacks permission for this; mint one that has it with felix admin token create --perms ...",

	{string(wire.CodeNotFound), wire.ReasonTenantNotFound}: "check --tenant (felix admin tenant list), " +
		"or create the tenant (felix admin tenant create NAME)",
	{string(wire.CodeNotFound), wire.ReasonNamespaceNotFound}: "check --namespace (felix admin namespace list), " +
		"or create the namespace (felix admin namespace create NAME)",
	{string(wire.CodeNotFound), wire.ReasonStreamNotFound}: "check the name, --tenant and --namespace (felix admin stream list), " +
		"or create the stream (felix admin stream create NAME)",
	{string(wire.CodeNotFound), wire.ReasonCacheNotFound}: "check the name, --tenant and --namespace (felix admin cache list), " +
		"or create the cache (felix admin cache create NAME)",
	{string(wire.CodeNotFound), wire.ReasonStreamDeleted}: "the stream was deleted while in use, and its messages with it; " +
		"if it should exist, create it again (felix admin stream create NAME)",
	{string(wire.CodeNotFound), wire.ReasonCacheDeleted}: "the cache was deleted while in use, and its keys with it; " +
		"if it should exist, create it again (felix admin cache create NAME)",
	{string(wire.CodeNotFound), ""}: "create it first (felix admin tenant|namespace|stream|cache create NAME), " +
		"or check the name, --tenant and --namespace (felix admin stream|cache list)",

	{string(wire.CodeOverloaded), wire.ReasonCacheFull}: "the cache is at its entry or byte limit; delete keys you no longer need " +
		"(felix cache delete), put them with a TTL, or create the cache with a higher --max-entries / --max-bytes",
	{string(wire.CodeOverloaded), wire.ReasonPublishQueueFull}: "the broker's publish queue is full for now; retry after a short wait, " +
		"or publish with --ack so each message waits for the one before",
	{string(wire.CodeOverloaded), "storage_full"}: "the broker's disk is full; free space under its log directory " +
		"or lower the stream's retention (felix admin stream update)",
	{string(wire.CodeOverloaded), "subscription_limit"}: "this connection holds as many subscriptions as the broker allows " +
		"(FELIX_MAX_SUBSCRIPTIONS_PER_CONN_TOTAL); close some or open another connection",
	{string(wire.CodeOverloaded), "block_wait_ended"}: "subscribers of this stream are not keeping up; retry once they catch up, " +
		"or change the stream's --policy (felix admin stream update)",
	{string(wire.CodeOverloaded), ""}: "the server is busy; retry later",

	{string(wire.CodeInvalidRequest), "value_too_large"}: "the value is larger than the cache's byte limit; " +
		"store a smaller value, or create the cache with a higher --max-bytes",
	{string(wire.CodeInvalidRequest), "shard_out_of_range"}: "the stream has fewer shards; see them with felix admin stream get NAME",
	{string(wire.CodeInvalidRequest), "not_durable"}: "only durable streams keep records to read; " +
		"use felix sub for this one, or create a durable stream (felix admin stream create NAME --durable)",

	{string(wire.CodeShardUnavailable), "forward_unanswered"}: "the broker passed the request to the shard's owner, which did not answer: " +
		"it may have been applied; read the key or stream to find out before sending it again",
	{string(wire.CodeShardUnavailable), ""}: "the broker cannot serve this shard's log; " +
		"its log says why (felix inspect segments shows the damage); other shards still work",
	{string(wire.CodeDraining), ""}:      "the broker is shutting down; retry once it is back, or against another broker",
	{string(wire.CodeQuorumTimeout), ""}: "the control plane has no quorum; check that a majority of its members is running",

	{codeConflict, ""}:          "it conflicts with what exists (see the message)",
	{codeUnreachable, ""}:       "is the server running there? check --controlplane / --broker (or client.json in --data-dir)",
	{codeBrokerUnreachable, ""}: "is felix serve (or felix broker) running, and is the address right? check --broker, FELIX_BROKER_ADDR or client.json in --data-dir; QUIC runs over UDP, so a firewall dropping UDP looks the same: --transport auto tries TLS over TCP too",
}

// tenantMismatchHint serves both codes a tenant mismatch arrives with.
const tenantMismatchHint = "the token is for another tenant; use a token minted for this tenant " +
	"(felix admin token create --tenant TENANT), or set --tenant to the tenant the token is for"

// hintFor is the advice for err, whose code errorCode found: the entry of
// its (code, reason), else its code's.
func hintFor(err error, code string) string {
	if h, ok := hints[hintKey{code, errorReason(err)}]; ok {
		return h
	}
	return hints[hintKey{code, ""}]
}

// errorReason is the detail's reason of a refusal from the broker or the
// control plane, or "".
func errorReason(err error) string {
	var api *APIError
	var be *felix.BrokerError
	var we *wire.Error
	switch {
	case errors.As(err, &api):
		return api.Reason
	case errors.As(err, &be):
		s, _ := be.Detail[wire.DetailReason].(string)
		return s
	case errors.As(err, &we):
		return we.Reason()
	}
	return ""
}

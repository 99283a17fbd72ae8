package controlplane

import (
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

const refreshPath = "/v1/tenants/acme/token/refresh"

func (h *harness) refresh(tok string) exchangeResponse {
	h.t.Helper()
	var out exchangeResponse
	h.expect(200, "POST", refreshPath, "", map[string]any{"refresh_token": tok}, &out)
	return out
}

func TestRefreshRotates(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*")
	first := h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now()),
		"resources": []string{"stream:acme/prod/orders"}, "ttl_seconds": 600})
	clock.Add(time.Minute)
	second := h.refresh(first.RefreshToken)
	if second.RefreshToken == first.RefreshToken || second.Token == first.Token {
		t.Fatal("refresh returned the same tokens")
	}
	if second.RefreshExpiresAt != first.RefreshExpiresAt {
		t.Fatalf("chain end moved: %s -> %s", first.RefreshExpiresAt, second.RefreshExpiresAt)
	}
	// The narrowing and TTL of the exchange carry over.
	id := h.verify(second.Token)
	if len(second.Permissions) != 1 || second.Permissions[0] != "stream.subscribe:stream:acme/prod/orders" ||
		id.Expiry.Sub(clock.Now()) != 10*time.Minute {
		t.Fatalf("refreshed token: perms %v, expires in %v", second.Permissions, id.Expiry.Sub(clock.Now()))
	}
	third := h.refresh(second.RefreshToken)
	h.verify(third.Token)

	h.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": "frt1.nope.0.x"}, "unknown refresh token")
	h.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": "garbage"}, "malformed refresh token")
	forged := third.RefreshToken[:strings.LastIndex(third.RefreshToken, ".")+1] + "AAAA"
	h.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": forged}, "unknown refresh token")
	h.expectError(400, "invalid_request", "POST", refreshPath, "", map[string]any{}, "refresh_token")
	h.expect(201, "POST", "/v1/tenants", h.admin, map[string]any{"tenant_id": "other"}, nil)
	h.expectError(401, "unauthorized", "POST", "/v1/tenants/other/token/refresh", "", map[string]any{"refresh_token": third.RefreshToken}, "unknown refresh token")
}

func TestRefreshConcurrentWithinGrace(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*")
	first := h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now())})
	const n = 4
	results := make([]exchangeResponse, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = h.refresh(first.RefreshToken) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, r := range results {
		if seen[r.RefreshToken] {
			t.Fatal("two refreshes got the same refresh token")
		}
		seen[r.RefreshToken] = true
		h.verify(r.Token)
	}
	// Within the grace, the superseded token works again.
	clock.Add(9 * time.Second)
	h.refresh(first.RefreshToken)
	if len(revocationsOf(h)) != 0 {
		t.Fatal("concurrent refreshes revoked the principal")
	}
}

func TestRefreshReplayRevokesChain(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*")
	first := h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now())})
	other := h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now())}) // another chain
	second := h.refresh(first.RefreshToken)
	clock.Add(11 * time.Second)
	replays := metrics.GetOrCreateCounter(`felix_controlplane_token_refreshes_total{result="replay"}`)
	before := replays.Get()
	h.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": first.RefreshToken}, "reused")
	if replays.Get() != before+1 {
		t.Fatal("replay not counted")
	}
	// The whole chain is dead, newest token included.
	h.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": second.RefreshToken}, "chain revoked")
	revs := revocationsOf(h)
	if len(revs) != 1 || revs[0].Subject != "alice" {
		t.Fatalf("revocations %+v", revs)
	}
	if !auth.Covers(revs[0], h.verify(second.Token)) {
		t.Fatal("the chain's access token is not revoked")
	}
	// Another chain of the principal still refreshes, with a token the
	// revocation does not cover.
	fresh := h.refresh(other.RefreshToken)
	if auth.Covers(revocationOf(map[string]int64{"alice": revs[0].RevokedBefore}, "alice"), h.verify(fresh.Token)) {
		t.Fatal("token refreshed after the revocation is covered by it")
	}
}

func TestRefreshRecomputesAndExpires(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*", "stream.publish:stream:acme/prod/*")
	first := h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now())})
	if len(first.Permissions) != 2 {
		t.Fatalf("perms %v", first.Permissions)
	}
	h.expect(200, "PUT", "/v1/tenants/acme/policies/reader", h.admin, map[string]any{"permissions": []string{"stream.subscribe:stream:acme/prod/*"}}, nil)
	second := h.refresh(first.RefreshToken)
	if len(second.Permissions) != 1 || second.Permissions[0] != "stream.subscribe:stream:acme/prod/*" {
		t.Fatalf("refresh kept old rights: %v", second.Permissions)
	}
	h.expect(204, "DELETE", "/v1/tenants/acme/principals/alice", h.admin, nil, nil)
	h.expectError(403, "forbidden", "POST", refreshPath, "", map[string]any{"refresh_token": second.RefreshToken}, "no roles")
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*")
	// A 403 did not use up the token.
	third := h.refresh(second.RefreshToken)
	clock.Add(defaultRefreshTokenTTL + time.Second)
	h.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": third.RefreshToken}, "expired")
}

func revocationsOf(h *harness) []wire.Revocation {
	h.t.Helper()
	var l listBody[wire.Revocation]
	h.expect(200, "GET", "/v1/tenants/acme/revocations", h.admin, nil, &l)
	return l.Items
}

// TestNarrowNeverWidens checks, over random grants and requests, that
// every access a narrowed token allows, the grants allow too.
func TestNarrowNeverWidens(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	actions := []string{"stream.publish", "stream.subscribe", "cache.read", "cache.write", "stream.*", "*"}
	segs := []string{"a", "b", "*", "a*", "ab"}
	pattern := func(prefix string) string {
		n := 1 + rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = segs[rng.IntN(len(segs))]
		}
		return prefix + strings.Join(parts, "/")
	}
	resource := func() string {
		if rng.IntN(8) == 0 {
			return "*"
		}
		return pattern([]string{"stream:", "cache:"}[rng.IntN(2)])
	}
	concrete := []string{"a", "b", "ab", "abc", "x"}
	for round := range 2000 {
		var granted, reqA, reqR []string
		for range 1 + rng.IntN(3) {
			granted = append(granted, actions[rng.IntN(len(actions))]+":"+resource())
		}
		for range 1 + rng.IntN(2) {
			reqA = append(reqA, actions[rng.IntN(len(actions))])
			reqR = append(reqR, resource())
		}
		got := auth.Narrow(granted, reqA, reqR)
		gm, err := auth.CompilePerms(granted)
		must(t, err)
		nm, err := auth.CompilePerms(got)
		if err != nil {
			t.Fatalf("round %d: Narrow made uncompilable perms %v: %v", round, got, err)
		}
		for range 50 {
			a := auth.Action([]string{"stream.publish", "stream.subscribe", "cache.read", "cache.write"}[rng.IntN(4)])
			n := 1 + rng.IntN(5)
			parts := make([]string, n)
			for i := range parts {
				parts[i] = concrete[rng.IntN(len(concrete))]
			}
			r := []string{"stream:", "cache:"}[rng.IntN(2)] + strings.Join(parts, "/")
			if nm.Allows(a, r) && !gm.Allows(a, r) {
				t.Fatalf("round %d: Narrow(%v, %v, %v) = %v allows %s on %s, which the grants do not", round, granted, reqA, reqR, got, a, r)
			}
		}
	}
}

// TestRefreshAcrossMembers: members of one Raft group agree on a chain:
// concurrent refreshes through two members both succeed, and a replay
// through a third revokes the chain everywhere.
func TestRefreshAcrossMembers(t *testing.T) {
	p, clock := newIDP(t), newClock()
	g := openTestGroup(t, 3)
	hs := map[uint64]*harness{}
	for id, store := range g.stores {
		svc, err := New(Config{Logger: quietLogger(), Now: clock.Now, RefreshReuseGrace: 10 * time.Second}, store)
		must(t, err)
		srv := httptest.NewServer(svc.Handler())
		t.Cleanup(srv.Close)
		hs[id] = &harness{t: t, svc: svc, srv: srv}
	}
	h1, h2, h3 := hs[1], hs[2], hs[3]
	h1.admin = clockToken(h1, clock)
	h1.expect(201, "POST", "/v1/tenants", h1.admin, map[string]any{"tenant_id": "acme"}, nil)
	h1.expect(200, "PUT", "/v1/tenants/acme/oidc", h1.admin, OIDCConfig{Issuer: testIssuer, Audience: testAudience, JWKSFile: p.jwksFile}, nil)
	h1.grant("reader", "alice", "stream.subscribe:stream:acme/*")
	first := h1.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now())})

	var wg sync.WaitGroup
	var r2, r3 exchangeResponse
	wg.Go(func() { r2 = h2.refresh(first.RefreshToken) })
	wg.Go(func() { r3 = h3.refresh(first.RefreshToken) })
	wg.Wait()
	if r2.RefreshToken == r3.RefreshToken {
		t.Fatal("two members handed out the same refresh token")
	}
	clock.Add(11 * time.Second)
	h1.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": first.RefreshToken}, "reused")
	for _, r := range []exchangeResponse{r2, r3} {
		h2.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": r.RefreshToken}, "chain revoked")
	}
}

// A chain refreshed many times keeps a bounded number of generation
// records, and a pruned generation presented again is a replay.
func TestRefreshChainIsPruned(t *testing.T) {
	p, clock := newIDP(t), newClock()
	h := newAuthHarness(t, p, clock)
	h.grant("reader", "alice", "stream.subscribe:stream:acme/prod/*")
	first := h.exchange(map[string]any{"oidc_token": p.token("alice", clock.Now())})
	family, _, _, _ := parseRefreshToken(first.RefreshToken)
	cur := first
	const refreshes = 12
	for range refreshes {
		clock.Add(11 * time.Second) // past the reuse grace every time
		cur = h.refresh(cur.RefreshToken)
	}
	kept := 0
	for g := uint64(0); g <= refreshes; g++ {
		if _, ok, err := h.svc.store.Meta(context.Background(), chainKey("acme", family, g)); err != nil {
			t.Fatal(err)
		} else if ok {
			kept++
		}
	}
	if kept > 3 {
		t.Fatalf("a chain refreshed %d times keeps %d generation records", refreshes, kept)
	}
	h.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": first.RefreshToken}, "reused")
	h.expectError(401, "unauthorized", "POST", refreshPath, "", map[string]any{"refresh_token": cur.RefreshToken}, "chain revoked")
}

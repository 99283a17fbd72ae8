package controlplane

import (
	"context"
	"testing"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

func TestHTTPAuthRefusals(t *testing.T) {
	h := newHarness(t)
	h.expect(201, "POST", "/v1/tenants", h.admin, wire.Tenant{TenantID: "acme"}, nil)
	h.expect(201, "POST", "/v1/tenants/acme/namespaces", h.admin, map[string]any{"namespace": "prod"}, nil)
	nsPath := "/v1/tenants/acme/namespaces"

	// No token, a malformed one, one signed by a stranger, an expired one.
	h.expectError(401, "unauthorized", "GET", nsPath, "", nil, "missing token")
	h.expectError(401, "unauthorized", "GET", nsPath, "not-a-jwt", nil, "malformed")
	stranger := strangerToken(t, "acme")
	h.expectError(401, "unauthorized", "GET", nsPath, stranger, nil)
	expired, err := h.svc.MintToken(auth.Claims{Subject: "old", TenantID: "acme", Perms: []string{"*:*"},
		IssuedAt: time.Now().Add(-2 * time.Hour), Expiry: time.Now().Add(-time.Hour)})
	must(t, err)
	h.expectError(401, "unauthorized", "GET", nsPath, expired, nil, "expired")

	// Wrong tenant: a full tenant token of another tenant.
	h.expect(201, "POST", "/v1/tenants", h.admin, wire.Tenant{TenantID: "other"}, nil)
	otherTok := h.token("other", "o", "tenant.manage:tenant:other", "tenant.manage:tenant:acme")
	h.expectError(401, "unauthorized", "GET", nsPath, otherTok, nil, "tenant mismatch")

	// Right tenant, missing permission.
	pub := h.token("acme", "p", "stream.publish:stream:acme/*")
	h.expectError(403, "forbidden", "GET", nsPath, pub, nil, "tenant.manage")
	h.expectError(403, "forbidden", "POST", "/v1/tenants/acme/tokens", pub, map[string]any{"sub": "x", "perms": []string{"stream.publish:stream:acme/*"}}, "token.create")

	// A tenant manager manages its tenant but not the cluster routes.
	mgr := h.token("acme", "m", "tenant.manage:tenant:acme")
	h.expect(200, "GET", nsPath, mgr, nil, nil)
	h.expect(201, "POST", "/v1/tenants/acme/namespaces/prod/streams", mgr, map[string]any{"stream": "s"}, nil)
	h.expectError(403, "forbidden", "GET", "/v1/tenants", mgr, nil, "cluster.manage")
	h.expectError(403, "forbidden", "GET", "/v1/catalog/streams/snapshot", mgr, nil, "cluster.manage")
	h.expectError(403, "forbidden", "POST", "/v1/tenants", mgr, wire.Tenant{TenantID: "x"}, "cluster.manage")

	// A cluster token of any tenant passes cluster routes.
	ops := h.token("acme", "ops", "cluster.manage:cluster")
	h.expect(200, "GET", "/v1/tenants", ops, nil, nil)
	h.expect(200, "GET", "/v1/catalog/tenants/changes?since=0", ops, nil, nil)

	// Unauthenticated routes.
	h.expect(200, "GET", "/v1/jwks", "", nil, nil)
	h.expect(200, "GET", "/.well-known/jwks.json", "", nil, nil)
	h.expect(200, "GET", "/live", "", nil, nil)
	h.expect(200, "GET", "/ready", "", nil, nil)
	h.expect(200, "GET", "/v1/openapi.json", "", nil, nil)
}

// strangerToken is a well-formed token signed by a key the service does
// not know.
func strangerToken(t *testing.T, tenant string) string {
	k, err := auth.GenerateSigningKey()
	must(t, err)
	tok, err := auth.NewSigner(k).Sign(auth.Claims{Subject: "x", TenantID: tenant, Perms: []string{"*:*"}, Expiry: time.Now().Add(time.Hour)})
	must(t, err)
	return tok
}

func TestHTTPMintToken(t *testing.T) {
	h := newHarness(t)
	var resp tokenResponse
	before := time.Now()
	h.expect(200, "POST", "/v1/tenants/default/tokens", h.admin,
		map[string]any{"sub": "app", "perms": []string{"stream.publish:stream:default/default/*", "cache.read:cache:default/*"}, "ttl_seconds": 600}, &resp)
	exp, err := time.Parse(time.RFC3339, resp.ExpiresAt)
	must(t, err)
	if d := exp.Sub(before); d < 590*time.Second || d > 610*time.Second {
		t.Fatalf("expires_at %s is not ~600s ahead", resp.ExpiresAt)
	}
	// The token verifies against the published JWKS and carries the perms.
	var jwks []byte
	status, jwks := h.do("GET", "/v1/jwks", "", nil)
	if status != 200 {
		t.Fatalf("jwks status %d", status)
	}
	v := auth.NewVerifier(auth.VerifierOptions{})
	must(t, v.SetJWKS(jwks))
	id, err := v.Verify(context.Background(), resp.Token, "default")
	must(t, err)
	if id.Subject != "app" || !id.Perms.Allows(auth.ActionStreamPublish, auth.StreamResource("default", "default", "orders")) ||
		id.Perms.Allows(auth.ActionStreamSubscribe, auth.StreamResource("default", "default", "orders")) {
		t.Fatalf("identity %+v perms %v", id, id.Perms.Perms())
	}
	if got := id.Perms.Perms(); len(got) != 2 {
		t.Fatalf("perms = %v", got)
	}

	// Minting for a missing tenant is not_found.
	h.expectError(404, "not_found", "POST", "/v1/tenants/ghost/tokens", h.admin, map[string]any{"sub": "a", "perms": []string{"*:*"}})

	// A tenant token with token.create can mint what it holds, no more.
	minter := h.token("default", "minter", "token.create:tenant:default", "stream.*:stream:default/*")
	h.expect(200, "POST", "/v1/tenants/default/tokens", minter, map[string]any{"sub": "a", "perms": []string{"stream.publish:stream:default/prod/*"}}, nil)
	h.expectError(403, "forbidden", "POST", "/v1/tenants/default/tokens", minter, map[string]any{"sub": "a", "perms": []string{"cluster.manage:cluster"}}, "cannot grant")
	h.expectError(403, "forbidden", "POST", "/v1/tenants/default/tokens", minter, map[string]any{"sub": "a", "perms": []string{"*:*"}}, "cannot grant")
	h.expectError(403, "forbidden", "POST", "/v1/tenants/default/tokens", minter, map[string]any{"sub": "a", "perms": []string{"stream.publish:stream:*"}}, "cannot grant")
}

func TestSigningKeyRotation(t *testing.T) {
	h := newHarness(t)
	old := h.admin
	must(t, h.svc.RotateSigningKey(bg))
	// Tokens of the old key still work; new tokens use the new key.
	h.expect(200, "GET", "/v1/tenants", old, nil, nil)
	fresh := h.token("default", "admin", "*:*")
	h.expect(200, "GET", "/v1/tenants", fresh, nil, nil)
	status, jwks := h.do("GET", "/v1/jwks", "", nil)
	if status != 200 {
		t.Fatal(status)
	}
	v := auth.NewVerifier(auth.VerifierOptions{})
	must(t, v.SetJWKS(jwks))
	for _, tok := range []string{old, fresh} {
		if _, err := v.Verify(bg, tok, "default"); err != nil {
			t.Fatalf("JWKS after rotation does not verify a token: %v", err)
		}
	}
	// The rotation survives a restart.
	h.srv.Close()
	must(t, h.svc.Close())
	svc := reopenService(t, h.path)
	defer svc.Close()
	tok, err := svc.MintToken(auth.Claims{Subject: "x", TenantID: "default", Perms: []string{"*:*"}, Expiry: time.Now().Add(time.Hour)})
	must(t, err)
	if tokenKID(t, tok) != tokenKID(t, fresh) {
		t.Fatal("active key after reopen is not the rotated one")
	}
}

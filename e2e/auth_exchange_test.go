package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// testIdP is an OIDC provider made up by the test: a key, its JWKS file,
// and tokens it signs.
type testIdP struct {
	t        *testing.T
	key      *ecdsa.PrivateKey
	jwksFile string
}

const (
	e2eIssuer   = "https://idp.e2e.test"
	e2eAudience = "felix-e2e"
)

func newTestIdP(t *testing.T) *testIdP {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "e2e-1", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := &testIdP{t: t, key: k, jwksFile: filepath.Join(t.TempDir(), "idp.jwks")}
	if err := os.WriteFile(p.jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tokenFile writes an upstream token for sub and returns its path.
func (p *testIdP) tokenFile(sub string) string {
	p.t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: p.key, KeyID: "e2e-1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		p.t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(s).Claims(jwt.Claims{Issuer: e2eIssuer, Subject: sub, Audience: jwt.Audience{e2eAudience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Serialize()
	if err != nil {
		p.t.Fatal(err)
	}
	f := filepath.Join(p.t.TempDir(), sub+".jwt")
	if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return f
}

// TestExchangedTokenFollowsRBAC exchanges an OIDC token for a Felix
// token through the CLI, checks the token holds exactly its role's grant,
// and that unassigning the role ends the subscription made with it while
// the gateway's own subscription keeps running.
func TestExchangedTokenFollowsRBAC(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	idp := newTestIdP(t)
	n.mustFelix(ctx, "admin", "stream", "create", "feed")
	n.mustFelix(ctx, "admin", "stream", "create", "private")
	n.mustFelix(ctx, "admin", "oidc", "set", "--issuer", e2eIssuer, "--audience", e2eAudience, "--jwks-file", idp.jwksFile)
	n.mustFelix(ctx, "admin", "rbac", "policy", "add", "reader", "stream.subscribe:stream:default/default/feed")
	n.mustFelix(ctx, "admin", "rbac", "role", "assign", "alice", "reader")

	// A principal without roles gets nothing.
	if out, errOut, code := n.felix(ctx, "admin", "token", "exchange", "--oidc-token", idp.tokenFile("mallory")); code == 0 || !strings.Contains(errOut, "no roles") {
		t.Fatalf("exchange for a principal without roles: exit %d, %q %q", code, out, errOut)
	}
	aliceTok := strings.TrimSpace(n.mustFelix(ctx, "admin", "token", "exchange", "--oidc-token", idp.tokenFile("alice")))
	if strings.Count(aliceTok, ".") != 2 {
		t.Fatalf("exchange printed %q, want a JWT", aliceTok)
	}

	gw := n.connect(ctx, n.adminToken())
	alice, err := gw.WithIdentityToken(n.client.Tenant, aliceTok)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	var aSub *felix.Subscription
	eventually(t, 10*time.Second, "alice's subscribe to succeed", func() bool {
		aSub, err = alice.Subscribe(ctx, "default", "feed")
		var be *felix.BrokerError
		if errors.As(err, &be) && be.Code != wire.CodeNotFound {
			t.Fatalf("alice's subscribe: %v", err)
		}
		return err == nil
	})
	defer aSub.Close()
	gSub, err := gw.Subscribe(ctx, "default", "feed")
	if err != nil {
		t.Fatal(err)
	}
	defer gSub.Close()

	var be *felix.BrokerError
	if _, err := alice.Subscribe(ctx, "default", "private"); !errors.As(err, &be) || be.Code != wire.CodeForbidden {
		t.Fatalf("alice's subscribe outside her grant: %v, want forbidden", err)
	}
	if err := alice.Publish(ctx, "default", "feed", []byte("x"), felix.AckPerMessage); !errors.As(err, &be) || be.Code != wire.CodeForbidden {
		t.Fatalf("alice's publish with a subscribe-only grant: %v, want forbidden", err)
	}
	if err := gw.Publish(ctx, "default", "feed", []byte("one"), felix.AckPerMessage); err != nil {
		t.Fatal(err)
	}
	for name, sub := range map[string]*felix.Subscription{"alice": aSub, "gateway": gSub} {
		if ev, err := sub.Next(ctx); err != nil || string(ev.Payload) != "one" {
			t.Fatalf("%s received %q, %v", name, ev.Payload, err)
		}
	}

	n.mustFelix(ctx, "admin", "rbac", "role", "unassign", "alice", "reader")
	waitCtx, waitCancel := context.WithTimeout(ctx, 15*time.Second)
	defer waitCancel()
	_, err = aSub.Next(waitCtx)
	if !errors.As(err, &be) || be.Code != wire.CodeRevoked {
		t.Fatalf("alice's subscription after unassign ended with %v, want revoked", err)
	}
	if err := gw.Publish(ctx, "default", "feed", []byte("two"), felix.AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if ev, err := gSub.Next(ctx); err != nil || string(ev.Payload) != "two" {
		t.Fatalf("gateway's subscription after alice's revocation: %q, %v", ev.Payload, err)
	}
	if out, errOut, code := n.felix(ctx, "admin", "token", "exchange", "--oidc-token", idp.tokenFile("alice")); code == 0 || !strings.Contains(errOut, "no roles") {
		t.Fatalf("exchange after unassign: exit %d, %q %q", code, out, errOut)
	}
}

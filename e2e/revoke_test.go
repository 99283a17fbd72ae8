package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// mintSubjectToken creates a token for sub with perms through the CLI.
func (n *node) mintSubjectToken(ctx context.Context, sub string, perms string) string {
	n.t.Helper()
	out := n.mustFelix(ctx, "admin", "token", "create", "--sub", sub, "--perms", perms, "--ttl", "1h", "-o", "json")
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Token == "" {
		n.t.Fatalf("token create -o json = %q (%v)", out, err)
	}
	return tok.Token
}

// TestHandlesActForTheirUsers runs two users over one gateway connection:
// each handle's requests are checked against its own user's grants.
func TestHandlesActForTheirUsers(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "feed")
	aliceTok := n.mintSubjectToken(ctx, "alice", "stream.*:stream:default/default/feed")
	bobTok := n.mintSubjectToken(ctx, "bob", "stream.subscribe:stream:default/default/feed")

	gw := n.connect(ctx, n.adminToken())
	alice, err := gw.WithIdentityToken(n.client.Tenant, aliceTok)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := gw.WithIdentityToken(n.client.Tenant, bobTok)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()

	var sub *felix.Subscription
	eventually(t, 10*time.Second, "bob's subscribe to succeed", func() bool {
		sub, err = bob.Subscribe(ctx, "default", "feed")
		var be *felix.BrokerError
		if errors.As(err, &be) && be.Code != wire.CodeNotFound {
			t.Fatalf("bob's subscribe: %v", err)
		}
		return err == nil
	})
	defer sub.Close()

	if err := alice.Publish(ctx, "default", "feed", []byte("from alice"), felix.AckPerMessage); err != nil {
		t.Fatalf("alice's publish: %v", err)
	}
	ev, err := sub.Next(ctx)
	if err != nil || string(ev.Payload) != "from alice" {
		t.Fatalf("bob received %q, %v", ev.Payload, err)
	}
	err = bob.Publish(ctx, "default", "feed", []byte("from bob"), felix.AckPerMessage)
	var be *felix.BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeForbidden {
		t.Fatalf("bob's publish with a subscribe-only token: %v, want forbidden", err)
	}
	// Bob's refusal ended only his publish stream: alice and the gateway
	// keep publishing over the same connection.
	if err := alice.Publish(ctx, "default", "feed", []byte("again"), felix.AckPerMessage); err != nil {
		t.Fatalf("alice after bob's refusal: %v", err)
	}
	if err := gw.Publish(ctx, "default", "feed", []byte("gateway"), felix.AckPerMessage); err != nil {
		t.Fatalf("gateway after bob's refusal: %v", err)
	}
	for _, want := range []string{"again", "gateway"} {
		if ev, err := sub.Next(ctx); err != nil || string(ev.Payload) != want {
			t.Fatalf("bob received %q, %v; want %q", ev.Payload, err, want)
		}
	}
}

// revokeSubject asks the control plane to revoke sub's tokens. Any answer
// but a 2xx fails the test: a 404 or 405 means the route was lost.
func (n *node) revokeSubject(ctx context.Context, sub string) {
	n.t.Helper()
	body, _ := json.Marshal(map[string]any{"subject": sub, "reason": "e2e"})
	url := fmt.Sprintf("%s/v1/tenants/%s/revocations", n.client.ControlPlaneURL, n.client.Tenant)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+n.adminToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		n.t.Fatalf("revoke %s: POST %s answered HTTP %d", sub, url, resp.StatusCode)
	}
}

// TestRevocationEndsOneUsersStreams revokes one user of a gateway and
// checks that only that user's subscription and calls end, with revoked.
func TestRevocationEndsOneUsersStreams(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "feed")
	perms := "stream.*:stream:default/default/feed"
	gw := n.connect(ctx, n.adminToken())
	alice, err := gw.WithIdentityToken(n.client.Tenant, n.mintSubjectToken(ctx, "alice", perms))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := gw.WithIdentityToken(n.client.Tenant, n.mintSubjectToken(ctx, "bob", perms))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	var aSub, bSub *felix.Subscription
	eventually(t, 10*time.Second, "the stream to reach the broker", func() bool {
		aSub, err = alice.Subscribe(ctx, "default", "feed")
		return err == nil
	})
	defer aSub.Close()
	if bSub, err = bob.Subscribe(ctx, "default", "feed"); err != nil {
		t.Fatal(err)
	}
	defer bSub.Close()

	time.Sleep(1100 * time.Millisecond) // revoked_before has one-second resolution
	n.revokeSubject(ctx, "alice")

	_, err = aSub.Next(ctx)
	var be *felix.BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeRevoked {
		t.Fatalf("alice's subscription ended with %v, want revoked", err)
	}
	err = alice.Publish(ctx, "default", "feed", []byte("x"), felix.AckPerMessage)
	if !errors.As(err, &be) || be.Code != wire.CodeRevoked {
		t.Fatalf("alice's publish after revocation: %v, want revoked", err)
	}
	if err := bob.Publish(ctx, "default", "feed", []byte("still here"), felix.AckPerMessage); err != nil {
		t.Fatalf("bob after alice's revocation: %v", err)
	}
	if ev, err := bSub.Next(ctx); err != nil || string(ev.Payload) != "still here" {
		t.Fatalf("bob received %q, %v", ev.Payload, err)
	}
}

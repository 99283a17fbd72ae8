package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// TestScopedTokenIsRefusedOutsideItsGrant mints a token that may only
// subscribe to one stream and checks the broker refuses it everything else,
// through the CLI and the SDK.
func TestScopedTokenIsRefusedOutsideItsGrant(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "events")
	out := n.mustFelix(ctx, "admin", "token", "create", "--sub", "bob",
		"--perms", "stream.subscribe:stream:default/default/events", "--ttl", "1h", "-o", "json")
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Token == "" {
		t.Fatalf("token create -o json = %q (%v)", out, err)
	}
	tokenFile := filepath.Join(n.dir, "bob.token")
	if err := os.WriteFile(tokenFile, []byte(tok.Token), 0o600); err != nil {
		t.Fatal(err)
	}

	// The CLI reports the refusal with its code and a non-zero exit.
	eventually(t, 10*time.Second, "the stream to reach the broker", func() bool {
		_, errOut, code := n.felix(ctx, "pub", "--token-file", tokenFile, "--ack", "events", "x")
		return code != 0 && strings.Contains(errOut, "forbidden")
	})

	// Through the SDK: publishing is forbidden, subscribing is allowed.
	c := n.connect(ctx, tok.Token)
	err := c.Publish(ctx, "default", "events", []byte("x"), felix.AckPerMessage)
	var be *felix.BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeForbidden || be.Retry != wire.RetryFatal {
		t.Fatalf("publish with a subscribe-only token: %v, want forbidden (fatal)", err)
	}
	var sub *felix.Subscription
	eventually(t, 10*time.Second, "a subscribe with a subscribe token to succeed", func() bool {
		sub, err = c.Subscribe(ctx, "default", "events")
		var be *felix.BrokerError
		if errors.As(err, &be) && be.Code != wire.CodeNotFound {
			t.Fatalf("subscribe with a subscribe token: %v", err)
		}
		return err == nil
	})
	sub.Close()

	// A token signed by someone else is refused at auth.
	bad := n.sdkConfig(tok.Token[:len(tok.Token)-4] + "AAAA")
	c2, err := felix.Connect(ctx, bad)
	if err == nil {
		// Connect may authenticate lazily; the first call must then fail.
		defer c2.Close()
		err = c2.Publish(ctx, "default", "events", []byte("x"), felix.AckPerMessage)
	}
	if !errors.As(err, &be) || be.Code != wire.CodeUnauthorized {
		t.Fatalf("a tampered token: %v, want unauthorized", err)
	}
}

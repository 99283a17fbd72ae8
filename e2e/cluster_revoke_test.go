package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// mintToken mints a token for sub with perms (felix admin token create).
func (d *devCluster) mintToken(ctx context.Context, sub, perms string) string {
	d.t.Helper()
	out := d.mustFelix(ctx, "admin", "token", "create", "--sub", sub, "--perms", perms, "--ttl", "1h", "-o", "json")
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Token == "" {
		d.t.Fatalf("token create --sub %s: %q %v", sub, out, err)
	}
	return tok.Token
}

// shardOwnedBy returns a shard of v that node owns.
func shardOwnedBy(t *testing.T, v wire.PlacementView, node string) uint32 {
	t.Helper()
	for _, a := range v.Shards {
		if a.NodeID == node && a.Unavailable == "" {
			return a.Shard
		}
	}
	t.Fatalf("%s owns no shard of %s: %+v", node, v.Name, v.Shards)
	return 0
}

// Revoking a principal ends its subscriptions on every broker, within the
// catalog sync, with revoked, and refuses its publishes, forwarded ones
// included; another principal's subscriptions keep running.
func TestClusterRevocationEndsStreamsOnEveryBroker(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const shards = 6
	v := d.createPlaced(ctx, "feed", shards)
	perms := "stream.*:stream:default/default/feed"
	aliceTok, bobTok := d.mintToken(ctx, "alice", perms), d.mintToken(ctx, "bob", perms)

	type member struct {
		node  devNode
		shard uint32 // a shard the node owns
		alice *felix.Client
		bob   *felix.Client
		aSub  *felix.Subscription
		bSub  *felix.Subscription
	}
	var ms []*member
	for _, n := range d.nodes {
		m := &member{node: n, shard: shardOwnedBy(t, v, n.NodeID)}
		m.alice, m.bob = d.connect(ctx, n.Name, aliceTok), d.connect(ctx, n.Name, bobTok)
		var err error
		eventually(t, expiryWait, "alice's subscription on "+n.Name, func() bool {
			m.aSub, err = m.alice.SubscribeFrom(ctx, "default", "feed", felix.SubscribeOptions{Shard: m.shard})
			return err == nil
		})
		if m.bSub, err = m.bob.SubscribeFrom(ctx, "default", "feed", felix.SubscribeOptions{Shard: m.shard}); err != nil {
			t.Fatalf("bob's subscription on %s: %v", n.Name, err)
		}
		t.Cleanup(func() { m.aSub.Close(); m.bSub.Close() })
		ms = append(ms, m)
	}
	// Alice publishes through a broker that does not own the shard: a
	// forward. Both principals' subscriptions on the owner receive it.
	entry := ms[0]
	other := ms[1]
	if _, err := entry.alice.PublishKeyedAcked(ctx, "default", "feed", keyForShard(other.shard, shards), []byte("before"), felix.AckPerMessage); err != nil {
		t.Fatalf("alice's forwarded publish before the revocation: %v", err)
	}
	for _, sub := range []*felix.Subscription{other.aSub, other.bSub} {
		nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
		ev, err := sub.Next(nctx)
		ncancel()
		if err != nil || string(ev.Payload) != "before" {
			t.Fatalf("subscription on %s before the revocation: %q %v", other.node.Name, ev.Payload, err)
		}
	}
	before, _ := d.metric(entry.node.Name, "felix_broker_forwarded_publishes_total")

	time.Sleep(1100 * time.Millisecond) // revoked_before has one-second resolution
	d.mustFelix(ctx, "admin", "token", "revoke", "--sub", "alice", "--reason", "left")

	for _, m := range ms {
		nctx, ncancel := context.WithTimeout(ctx, expiryWait)
		_, err := m.aSub.Next(nctx)
		ncancel()
		var be *felix.BrokerError
		if !errors.As(err, &be) || be.Code != wire.CodeRevoked {
			t.Fatalf("alice's subscription on %s ended with %v, want revoked", m.node.Name, err)
		}
	}
	// Every broker has the revocation now: a publish through a non-owner
	// is refused revoked, and a direct one too.
	err := publishUntilRevoked(ctx, entry.alice, keyForShard(other.shard, shards))
	if err != nil {
		t.Fatalf("alice's forwarded publish after the revocation: %v", err)
	}
	if after, _ := d.metric(entry.node.Name, "felix_broker_forwarded_publishes_total"); after != before {
		t.Fatalf("%s forwarded a revoked principal's publish (%v -> %v)", entry.node.Name, before, after)
	}
	if err := publishUntilRevoked(ctx, other.alice, keyForShard(other.shard, shards)); err != nil {
		t.Fatalf("alice's direct publish after the revocation: %v", err)
	}

	// Bob carries on everywhere, forwarded publishes included.
	for i, m := range ms {
		payload := fmt.Sprintf("bob-%d", i)
		if _, err := entry.bob.PublishKeyedAcked(ctx, "default", "feed", keyForShard(m.shard, shards), []byte(payload), felix.AckPerMessage); err != nil {
			t.Fatalf("bob's publish to shard %d: %v", m.shard, err)
		}
		nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
		ev, err := m.bSub.Next(nctx)
		ncancel()
		if err != nil || string(ev.Payload) != payload {
			t.Fatalf("bob's subscription on %s after alice's revocation: %q %v", m.node.Name, ev.Payload, err)
		}
	}
}

// publishUntilRevoked publishes as a revoked principal until the broker
// refuses it revoked, and returns nil then. The revocation also ends the
// principal's control stream on each broker, asynchronously: a publish
// that was on its way when the stream ended is refused with the stream
// (outcome unknown: the broker may have read it before the end), and the
// next one opens a new stream, whose auth is refused revoked. Anything
// else, or no revoked refusal within three publishes, is the error.
func publishUntilRevoked(ctx context.Context, c *felix.Client, key []byte) error {
	var err error
	for range 3 {
		_, err = c.PublishKeyedAcked(ctx, "default", "feed", key, []byte("after"), felix.AckPerMessage)
		var be *felix.BrokerError
		switch {
		case errors.As(err, &be) && be.Code == wire.CodeRevoked:
			return nil
		case err == nil:
			return errors.New("a revoked principal's publish was acknowledged")
		case errors.As(err, &be) && be.Retry == wire.RetryOutcomeUnknown &&
			(strings.Contains(err.Error(), "canceled by remote") || strings.Contains(err.Error(), "stream reset (remote)")):
			// The stream the revocation ended (QUIC and TCP word the reset
			// differently); the next publish authenticates again.
			continue
		default:
			return fmt.Errorf("%w, want revoked", err)
		}
	}
	return fmt.Errorf("still not refused revoked after three publishes: %w", err)
}

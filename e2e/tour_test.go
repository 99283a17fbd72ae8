package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestReadmeTour runs the README's five-minute tour against the real
// binary, in the same order and with the same commands.
func TestReadmeTour(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	n.mustFelix(ctx, "admin", "stream", "create", "events")
	waitForSubscription := func(want float64) {
		eventually(t, 10*time.Second, "the subscription to register", func() bool {
			return n.metric("felix_broker_subscriptions") >= want
		})
	}
	wait := n.startFelix(ctx, "sub", "events", "--count", "3")
	waitForSubscription(1)
	n.mustFelix(ctx, "pub", "events", "one", "two", "three")
	out, err := wait()
	if err != nil {
		t.Fatalf("felix sub: %v", err)
	}
	if got := strings.TrimSpace(out); got != "one\ntwo\nthree" {
		t.Fatalf("felix sub printed %q, want one, two, three on their own lines", got)
	}

	n.mustFelix(ctx, "admin", "cache", "create", "sessions")
	eventually(t, 10*time.Second, "the cache to reach the broker", func() bool {
		_, _, code := n.felix(ctx, "cache", "put", "sessions", "user-1", "hello", "--ttl", "30s")
		return code == 0
	})
	if got := strings.TrimSpace(n.mustFelix(ctx, "cache", "get", "sessions", "user-1")); got != "hello" {
		t.Fatalf("cache get printed %q, want hello", got)
	}

	// The watch: user-1's current value, the end of the current values,
	// then the put of user-2 (--count stops it after that one change).
	wait = n.startFelix(ctx, "cache", "watch", "sessions", "user-", "--prefix", "--retained", "--count", "1")
	eventually(t, 10*time.Second, "the watch to register", func() bool {
		return n.metric("felix_cache_watches") >= 1
	})
	n.mustFelix(ctx, "cache", "put", "sessions", "user-2", "hi")
	out, err = wait()
	if err != nil {
		t.Fatalf("felix cache watch: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], " retained user-1 hello") ||
		!strings.HasSuffix(lines[1], " state-complete 1") || !strings.HasSuffix(lines[2], " put user-2 hi") {
		t.Fatalf("cache watch printed %q, want user-1's value, state-complete 1, then the put of user-2", out)
	}
}

// TestFlagsAfterPositionals checks that flags may follow positional
// arguments as well as precede them.
func TestFlagsAfterPositionals(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "--shards", "2", "orders")
	out := n.mustFelix(ctx, "admin", "stream", "get", "orders", "-o", "json")
	if !strings.Contains(out, `"shards": 2`) && !strings.Contains(out, `"shards":2`) {
		t.Fatalf("stream get -o json = %s, want shards 2", out)
	}
	wait := n.startFelix(ctx, "sub", "--count", "1", "orders")
	eventually(t, 10*time.Second, "the subscription to register", func() bool {
		return n.metric("felix_broker_subscriptions") >= 1
	})
	n.mustFelix(ctx, "pub", "orders", "x")
	if out, err := wait(); err != nil || strings.TrimSpace(out) != "x" {
		t.Fatalf("sub --count 1 orders: %q, %v", out, err)
	}
}

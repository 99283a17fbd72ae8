package felix

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestConnectAuthenticates(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: wire.FeatureCacheDelete})
	c := connect(t, fb)
	if c.ServerFlags() != binaryFlags || c.ServerFeatures() != wire.FeatureCacheDelete {
		t.Fatalf("server flags %#x features %#x", c.ServerFlags(), c.ServerFeatures())
	}
}

func TestConnectRefusedAuth(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{})
	cfg := fb.config()
	cfg.Token = "bad"
	c, err := Connect(context.Background(), cfg)
	if err == nil {
		c.Close()
		t.Fatal("connect with a bad token succeeded")
	}
	be := asBroker(t, err)
	if be.Code != wire.CodeUnauthorized || be.Retry != wire.RetryFatal {
		t.Fatalf("got %+v", be)
	}
}

func TestConfigValidation(t *testing.T) {
	_, err := Connect(context.Background(), Config{PublishStreams: -1})
	if err == nil {
		t.Fatal("empty config accepted")
	}
	for _, want := range []string{"Addr", "Tenant", "Token", "CAFile", "PublishStreams"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	tokenFile := dir + "/token"
	if err := writeFile(tokenFile, "tok-from-file\n"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FELIX_BROKER_ADDR", "127.0.0.1:5000")
	t.Setenv("FELIX_TENANT", "acme")
	t.Setenv("FELIX_TOKEN", "")
	t.Setenv("FELIX_TOKEN_FILE", tokenFile)
	t.Setenv("FELIX_CA_FILE", "/ca.pem")
	t.Setenv("FELIX_KEEPALIVE_MS", "1500")
	t.Setenv("FELIX_MAX_IDLE_TIMEOUT_MS", "9000")
	cfg := ConfigFromEnv()
	if cfg.Addr != "127.0.0.1:5000" || cfg.Tenant != "acme" || cfg.Token != "tok-from-file" ||
		cfg.CAFile != "/ca.pem" || cfg.KeepAlive.Milliseconds() != 1500 || cfg.MaxIdleTimeout.Milliseconds() != 9000 {
		t.Fatalf("got %+v", cfg)
	}
	t.Setenv("FELIX_KEEPALIVE_MS", "soon")
	_, err := Connect(context.Background(), ConfigFromEnv())
	if err == nil || !strings.Contains(err.Error(), "FELIX_KEEPALIVE_MS") {
		t.Fatalf("bad FELIX_KEEPALIVE_MS not reported: %v", err)
	}
}

func TestCallsAfterCloseFail(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	c.Close()
	ctx := context.Background()
	if err := c.Publish(ctx, "ns", "s", []byte("x"), AckNone); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
	if _, _, err := c.CacheGet(ctx, "ns", "c", "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("cache get after close: %v", err)
	}
	if _, err := c.Subscribe(ctx, "ns", "s"); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
	if err := c.Finish(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("finish after close: %v", err)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func TestCloseLeavesNoGoroutines(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: wire.FeatureCacheDelete})
	before := runtime.NumGoroutine()
	c, err := Connect(context.Background(), fb.config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Publish(ctx, "ns", "s", []byte("x"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CacheGet(ctx, "ns", "c", "k"); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	fb.nextSubscription().send(t, 0, []byte("e"))
	next(t, sub)
	c.Close()
	// quic-go's own connection goroutines wind down asynchronously after
	// the close; the client's are all gone when Close returns.
	waitGoroutinesAtMost(t, before)
}

// waitGoroutinesAtMost waits until no more goroutines run than before; after
// five seconds it fails the test with every goroutine's stack.
func waitGoroutinesAtMost(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

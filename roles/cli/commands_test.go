package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

func TestVersionOutput(t *testing.T) {
	r := run(t, toolkit{}, nil, "version")
	want := fmt.Sprintf("felix 1.2.3\ncommit: abc123\nbuilt:  2026-11-29\ngo:     %s\n", runtime.Version())
	if r.err != nil || r.stdout != want {
		t.Fatalf("text: %q, %v; want %q", r.stdout, r.err, want)
	}
	r = run(t, toolkit{}, nil, "version", "-o", "json")
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.err != nil {
		t.Fatalf("json %q: %v %v", r.stdout, err, r.err)
	}
	if got["version"] != "1.2.3" || got["commit"] != "abc123" || got["date"] != "2026-11-29" {
		t.Fatalf("json = %v", got)
	}
	r = run(t, toolkit{}, nil, "version", "-o", "yaml")
	if r.exitCode() != exitUsage {
		t.Fatalf("-o yaml: exit %d (%v), want %d", r.exitCode(), r.err, exitUsage)
	}
}

func TestCacheGetOutput(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{cache: map[string]string{"sessions/k1": "v1", "sessions/bin": "\xff\x00"}}
	tk := fb.toolkit()

	r := run(t, tk, nil, "cache", "get", "sessions", "k1", "--data-dir", dir)
	if r.err != nil || r.stdout != "v1\n" {
		t.Fatalf("text: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "cache", "get", "sessions", "k1", "-o", "json", "--data-dir", dir)
	if r.err != nil || r.stdout != `{"cache":"sessions","found":true,"key":"k1","value":"v1"}`+"\n" {
		t.Fatalf("json: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "cache", "get", "sessions", "bin", "-o", "json", "--data-dir", dir)
	if r.err != nil || !strings.Contains(r.stdout, `"value_base64":"/wA="`) {
		t.Fatalf("binary json: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "cache", "get", "sessions", "absent", "--data-dir", dir)
	if r.exitCode() != 1 || !strings.HasPrefix(r.message(), "not found") || r.stdout != "" {
		t.Fatalf("absent: exit %d %q stdout %q", r.exitCode(), r.message(), r.stdout)
	}
	if !fb.closed {
		t.Fatal("client not closed")
	}
}

func TestCachePutAndDelete(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{}
	tk := fb.toolkit()
	if r := run(t, tk, nil, "cache", "put", "sessions", "k", "v", "--ttl", "30s", "--data-dir", dir); r.err != nil || r.stdout != "" {
		t.Fatalf("put: %q %v", r.stdout, r.err)
	}
	if r := run(t, tk, nil, "cache", "delete", "sessions", "k", "--data-dir", dir); r.err != nil || r.stdout != "v\n" {
		t.Fatalf("delete: %q %v", r.stdout, r.err)
	}
	if r := run(t, tk, nil, "cache", "delete", "sessions", "k", "--data-dir", dir); r.exitCode() != 1 || r.stdout != "" {
		t.Fatalf("delete again: %q %v", r.stdout, r.err)
	}
	if r := run(t, tk, nil, "cache", "put", "sessions", "k", "--data-dir", dir); r.exitCode() != exitUsage {
		t.Fatalf("put without value: exit %d %v", r.exitCode(), r.err)
	}
}

func TestPubModes(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()

	fb := &fakeBroker{}
	r := run(t, fb.toolkit(), strings.NewReader("one\r\ntwo\n\nthree"), "pub", "events", "--stdin", "--ack", "--key", "k", "--data-dir", dir)
	if r.err != nil || r.stdout != "4 message(s) acknowledged (stream events keeps no offsets: it is not durable)\n" {
		t.Fatalf("stdin: %q %v", r.stdout, r.err)
	}
	if !slices.Equal(fb.published, []string{"one", "two", "", "three"}) || fb.keys[0] != "k" || fb.acks[0] != felix.AckPerMessage {
		t.Fatalf("published %q keys %q acks %v", fb.published, fb.keys, fb.acks)
	}
	if fb.finished != 0 {
		t.Fatal("Finish called with --ack")
	}

	for _, args := range [][]string{
		{"pub", "events", "--data-dir", dir},
		{"pub", "events", "x", "--stdin", "--data-dir", dir},
		{"pub", "--data-dir", dir},
	} {
		if r := run(t, (&fakeBroker{}).toolkit(), nil, args...); r.exitCode() != exitUsage {
			t.Errorf("%q: exit %d (%v), want %d", args, r.exitCode(), r.err, exitUsage)
		}
	}
}

func TestSubJSONAndStart(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{shards: 3, events: []felix.Event{{Payload: []byte("a"), Offset: 7, HasOffset: true}, {Payload: []byte("b")}}}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--from", "5", "--shard", "2", "--count", "2", "-o", "json", "--data-dir", t.TempDir())
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := `{"offset":7,"payload":"a","shard":2}` + "\n" + `{"payload":"b","shard":2}` + "\n"
	if r.stdout != want {
		t.Fatalf("got %q want %q", r.stdout, want)
	}
	if fb.subOpts.Shard != 2 || fb.subOpts.Start != (wire.StartPosition{Kind: wire.StartOffset, Offset: 5}) {
		t.Fatalf("options %+v", fb.subOpts)
	}
	if r := run(t, fb.toolkit(), nil, "sub", "events", "--from", "soon"); r.exitCode() != exitUsage {
		t.Fatalf("--from soon: exit %d", r.exitCode())
	}
}

func TestErrorRendering(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&APIError{Status: 404, Code: "not_found", Message: "no stream default/default/x"},
			"error: no stream default/default/x (code not_found)\nhint: create it first"},
		{fmt.Errorf("publish: %w", &felix.BrokerError{Code: wire.CodeForbidden, Message: "no publish permission"}),
			"error: no publish permission (code forbidden)\nhint: the token lacks permission"},
		{&felix.BrokerError{Code: wire.CodeUnauthorized, Message: "token expired"},
			"error: token expired (code unauthorized)\nhint: check the token file"},
		{wire.NewError(wire.CodeOverloaded, "queue full"), "error: queue full (code overloaded)\nhint: the server is busy; retry later"},
		{errors.New("dial: refused"), "error: dial: refused"},
	}
	for _, tc := range cases {
		err := exitError(tc.err)
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("exitError(%v) = %q, want prefix %q", tc.err, err.Error(), tc.want)
		}
		if code := (result{err: err}).exitCode(); code != exitGeneric {
			t.Errorf("exit code %d", code)
		}
	}
}

func TestSubEndsCleanlyWhenInterrupted(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{events: []felix.Event{{Payload: []byte("a")}}, idle: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- runCtx(ctx, fb.toolkit(), nil, "sub", "events", "--data-dir", t.TempDir()) }()
	<-fb.idle
	cancel()
	r := <-done
	if r.err != nil || r.stdout != "a\n" || !fb.closed {
		t.Fatalf("interrupted sub: %q %v closed=%v", r.stdout, r.err, fb.closed)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	clearEnv(t)
	for _, args := range [][]string{
		{"sub", "events", "--bogus"},
		{"sub"},
		{"sub", "a", "b"},
		{"admin", "stream", "bogus"},
		{"cache", "get", "onlycache"},
		{"version", "extra"},
	} {
		r := run(t, (&fakeBroker{}).toolkit(), nil, append(args, "--data-dir", t.TempDir())...)
		if r.exitCode() != exitUsage || !strings.HasPrefix(r.message(), "error: ") {
			t.Errorf("%q: exit %d %q, want a usage error", args, r.exitCode(), r.message())
		}
	}
}

func TestRefusedConnectionHint(t *testing.T) {
	clearEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	tok := filepath.Join(t.TempDir(), "t")
	os.WriteFile(tok, []byte("x"), 0o600)
	r := run(t, toolkit{}, nil, "admin", "stream", "list", "--controlplane", addr, "--token-file", tok, "--data-dir", t.TempDir())
	if r.exitCode() != 1 || !strings.Contains(r.message(), "\nhint: is the server running") || strings.Contains(r.message(), "(code") {
		t.Fatalf("exit %d %q", r.exitCode(), r.message())
	}
}

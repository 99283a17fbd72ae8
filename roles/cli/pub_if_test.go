package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// PublishIf appends payloads to published only at its length (the fake's
// one shard's next offset), as a broker does; an in-memory fake (durable
// false) refuses as the broker does.
func (f *fakeBroker) PublishIf(_ context.Context, ns, stream string, key []byte, payloads [][]byte, expected uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.condCalls++
	if f.condErr != nil {
		return 0, f.condErr
	}
	if !f.durable {
		return 0, &felix.BrokerError{Code: wire.CodeInvalidRequest, Retry: wire.RetryFatal, Message: "stream " + stream + " is not durable",
			Detail: map[string]any{wire.DetailReason: "not_durable"}}
	}
	tail := uint64(len(f.published))
	if tail != expected {
		return 0, &felix.OffsetMismatchError{Expected: expected, Tail: tail}
	}
	for _, p := range payloads {
		f.published = append(f.published, string(p))
		f.keys = append(f.keys, string(key))
	}
	return tail, nil
}

func TestPubIfOffset(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{durable: true}
	tk := fb.toolkit()
	r := run(t, tk, nil, "pub", "orders", "a", "b", "--if-offset", "0", "--key", "k", "--data-dir", dir)
	if r.err != nil || r.stdout != "offset 0\noffset 1\n" {
		t.Fatalf("pub --if-offset 0: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "pub", "orders", "late", "--if-offset", "0", "--data-dir", dir)
	if r.exitCode() != exitConditionRefused || r.stdout != "" || !strings.Contains(r.message(), "refused") || !strings.Contains(r.message(), "at offset 2") {
		t.Fatalf("stale pub --if-offset: exit %d %q stdout %q", r.exitCode(), r.message(), r.stdout)
	}
	r = run(t, tk, nil, "pub", "orders", "late", "--if-offset", "7", "-o", "json", "--data-dir", dir)
	if r.exitCode() != exitConditionRefused || r.stdout != `{"expected":7,"stream":"orders","tail":2,"written":false}`+"\n" {
		t.Fatalf("pub --if-offset -o json refused: exit %d %q", r.exitCode(), r.stdout)
	}
	r = run(t, tk, strings.NewReader("c\nd\n"), "pub", "orders", "--stdin", "--if-offset", "2", "-o", "json", "--data-dir", dir)
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); r.err != nil || err != nil || doc["written"] != true || doc["published"] != float64(2) ||
		len(doc["offsets"].([]any)) != 2 || doc["offsets"].([]any)[1] != float64(3) {
		t.Fatalf("pub --stdin --if-offset -o json: %q, %v", r.stdout, r.err)
	}
	if strings.Join(fb.published, ",") != "a,b,c,d" || fb.keys[0] != "k" {
		t.Fatalf("published %v keys %v", fb.published, fb.keys)
	}
	if r := run(t, tk, nil, "pub", "orders", "x", "--if-offset", "4", "--ack", "--data-dir", dir); r.exitCode() != exitUsage {
		t.Fatalf("--if-offset with --ack: exit %d %v", r.exitCode(), r.err)
	}
	if r := run(t, tk, strings.NewReader(""), "pub", "orders", "--stdin", "--if-offset", "4", "--data-dir", dir); r.exitCode() != exitGeneric {
		t.Fatalf("--if-offset with empty stdin: exit %d %v", r.exitCode(), r.err)
	}
}

// An in-memory stream is refused with a hint, and a conditional publish
// whose answer was lost is reported, not sent again.
func TestPubIfOffsetFailures(t *testing.T) {
	clearEnv(t)
	mem := &fakeBroker{}
	r := run(t, mem.toolkit(), nil, "pub", "events", "x", "--if-offset", "0", "--data-dir", t.TempDir())
	if r.exitCode() != exitGeneric || !strings.Contains(r.message(), "--durable") {
		t.Fatalf("in-memory stream: exit %d %q", r.exitCode(), r.message())
	}
	lost := &fakeBroker{durable: true, condErr: &felix.BrokerError{Code: wire.CodeInternal, Retry: wire.RetryOutcomeUnknown,
		Message: "no answer before the connection failed; the publish_if may have been applied"}}
	r = run(t, lost.toolkit(), nil, "pub", "events", "x", "--if-offset", "0", "--data-dir", t.TempDir())
	if r.exitCode() != exitGeneric || !strings.Contains(r.message(), "may have been applied") {
		t.Fatalf("lost answer: exit %d %q", r.exitCode(), r.message())
	}
	if lost.condCalls != 1 {
		t.Fatalf("sent %d times", lost.condCalls)
	}
}

func TestPubIfOffsetHelp(t *testing.T) {
	r := run(t, toolkit{}, nil, "pub", "--help")
	for _, want := range []string{"--if-offset N", "exactly one is written", "exits with code 3", "never sent again"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("pub --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

func (f *fakeBroker) CounterAdd(_ context.Context, ns, cache, key string, delta int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addCalls++
	if f.counterErr != nil {
		return 0, f.counterErr
	}
	if f.counters == nil {
		f.counters = map[string]int64{}
	}
	f.counters[cache+"/"+key] += delta
	return f.counters[cache+"/"+key], nil
}

func (f *fakeBroker) CounterGet(_ context.Context, ns, cache, key string) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counterErr != nil {
		return 0, false, f.counterErr
	}
	sum, ok := f.counters[cache+"/"+key]
	return sum, ok, nil
}

// add prints the new sum (a negative delta after --), get prints the
// sum, and a never-written counter says so and exits 1.
func TestCounterAddAndGet(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{}
	dir := t.TempDir()
	r := run(t, fb.toolkit(), nil, "counter", "add", "limits", "u42", "5", "--data-dir", dir)
	if r.err != nil || r.stdout != "5\n" {
		t.Fatalf("add: %v %q", r.err, r.stdout)
	}
	r = run(t, fb.toolkit(), nil, "counter", "add", "limits", "u42", "--data-dir", dir, "--", "-7")
	if r.err != nil || r.stdout != "-2\n" {
		t.Fatalf("add a negative delta: %v %q", r.err, r.stdout)
	}
	r = run(t, fb.toolkit(), nil, "counter", "get", "limits", "u42", "--data-dir", dir)
	if r.err != nil || r.stdout != "-2\n" {
		t.Fatalf("get: %v %q", r.err, r.stdout)
	}
	r = run(t, fb.toolkit(), nil, "counter", "get", "limits", "nobody", "--data-dir", dir)
	if r.exitCode() != exitGeneric || r.stdout != "" || !strings.Contains(r.message(), "never written") {
		t.Fatalf("get never written: exit %d %q %q", r.exitCode(), r.stdout, r.message())
	}
	r = run(t, fb.toolkit(), nil, "counter", "get", "limits", "nobody", "-o", "json", "--data-dir", dir)
	var doc map[string]any
	if json.Unmarshal([]byte(r.stdout), &doc) != nil || doc["found"] != false || r.exitCode() != exitGeneric {
		t.Fatalf("get -o json never written: exit %d %q", r.exitCode(), r.stdout)
	}
	r = run(t, fb.toolkit(), nil, "counter", "add", "limits", "u42", "1.5", "--data-dir", dir)
	if r.exitCode() != exitUsage {
		t.Fatalf("a delta that is not an integer: exit %d %q", r.exitCode(), r.message())
	}
}

// An add whose answer was lost is reported, not sent again.
func TestCounterAddOutcomeUnknownIsNotRetried(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{counterErr: &felix.BrokerError{Code: wire.CodeInternal, Retry: wire.RetryOutcomeUnknown,
		Message: "no answer before the connection failed; the counter_add may have been applied"}}
	r := run(t, fb.toolkit(), nil, "counter", "add", "limits", "u42", "1", "--data-dir", t.TempDir())
	if r.exitCode() != exitGeneric || !strings.Contains(r.message(), "may have been applied") {
		t.Fatalf("exit %d %q", r.exitCode(), r.message())
	}
	if fb.addCalls != 1 {
		t.Fatalf("sent %d times", fb.addCalls)
	}
}

func TestCounterHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"counter", "add", "--help"}, "felix counter add CACHE KEY DELTA"},
		{[]string{"counter", "get", "--help"}, "never written"},
		{[]string{"counter", "--help"}, "durable storage"},
	} {
		r := run(t, toolkit{}, nil, c.args...)
		if r.err != nil || !strings.Contains(r.stdout, c.want) {
			t.Fatalf("%v: %v\n%s", c.args, r.err, r.stdout)
		}
	}
}

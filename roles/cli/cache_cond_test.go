package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

func (f *fakeBroker) CachePutIf(_ context.Context, ns, cache, key string, value []byte, ttl time.Duration, cond felix.CacheCondition) (felix.CondResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.condCalls++
	if f.condErr != nil {
		return felix.CondResult{}, f.condErr
	}
	if f.cache == nil {
		f.cache, f.versions = map[string]string{}, map[string]uint64{}
	}
	k := cache + "/" + key
	cur, live := f.versions[k]
	if (cond.Absent && live) || (!cond.Absent && (!live || cur != cond.Version)) {
		return felix.CondResult{Version: cur, HasVersion: live}, nil
	}
	f.lastVersion++
	f.cache[k], f.versions[k] = string(value), 1000+f.lastVersion
	return felix.CondResult{Applied: true, Version: f.versions[k], HasVersion: true}, nil
}

func (f *fakeBroker) CacheDeleteIf(_ context.Context, ns, cache, key string, version uint64) (felix.CondResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.condErr != nil {
		return felix.CondResult{}, f.condErr
	}
	k := cache + "/" + key
	cur, live := f.versions[k]
	if !live || cur != version {
		return felix.CondResult{Version: cur, HasVersion: live}, nil
	}
	delete(f.cache, k)
	delete(f.versions, k)
	return felix.CondResult{Applied: true}, nil
}

func (f *fakeBroker) CacheGetVersioned(_ context.Context, ns, cache, key string) ([]byte, uint64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.condErr != nil {
		return nil, 0, false, f.condErr
	}
	v, ok := f.cache[cache+"/"+key]
	return []byte(v), f.versions[cache+"/"+key], ok, nil
}

func TestCachePutIfAbsentAndVersion(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{}
	tk := fb.toolkit()
	r := run(t, tk, nil, "cache", "put", "leases", "e7", "me", "--ttl", "30s", "--if-absent", "--data-dir", dir)
	if r.err != nil || r.stdout != "1001\n" {
		t.Fatalf("put --if-absent: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "cache", "put", "leases", "e7", "you", "--if-absent", "--data-dir", dir)
	if r.exitCode() != exitConditionRefused || r.stdout != "" || !strings.Contains(r.message(), "refused") || !strings.Contains(r.message(), "version 1001") {
		t.Fatalf("refused put --if-absent: exit %d %q stdout %q", r.exitCode(), r.message(), r.stdout)
	}
	r = run(t, tk, nil, "cache", "put", "leases", "e7", "you", "--if-version", "1001", "-o", "json", "--data-dir", dir)
	if r.err != nil || r.stdout != `{"applied":true,"cache":"leases","key":"e7","version":1002}`+"\n" {
		t.Fatalf("put --if-version: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "cache", "put", "leases", "e7", "x", "--if-version", "1001", "-o", "json", "--data-dir", dir)
	if r.exitCode() != exitConditionRefused || r.stdout != `{"applied":false,"cache":"leases","key":"e7","version":1002}`+"\n" {
		t.Fatalf("stale put --if-version: exit %d %q", r.exitCode(), r.stdout)
	}
	r = run(t, tk, nil, "cache", "put", "leases", "nobody", "x", "--if-version", "5", "--data-dir", dir)
	if r.exitCode() != exitConditionRefused || !strings.Contains(r.message(), "is absent") {
		t.Fatalf("put --if-version on an absent key: exit %d %q", r.exitCode(), r.message())
	}
	if r := run(t, tk, nil, "cache", "put", "leases", "e7", "x", "--if-absent", "--if-version", "3", "--data-dir", dir); r.exitCode() != exitUsage {
		t.Fatalf("both conditions: exit %d %v", r.exitCode(), r.err)
	}
	if fb.cache["leases/e7"] != "you" {
		t.Fatalf("stored %q", fb.cache["leases/e7"])
	}
}

func TestCacheGetVersionedAndDeleteIfVersion(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{}
	tk := fb.toolkit()
	run(t, tk, nil, "cache", "put", "config", "ep", "a,b", "--if-absent", "--data-dir", dir)
	r := run(t, tk, nil, "cache", "get", "config", "ep", "--versioned", "--data-dir", dir)
	if r.err != nil || r.stdout != "1001\na,b\n" {
		t.Fatalf("get --versioned: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "cache", "get", "config", "ep", "--versioned", "-o", "json", "--data-dir", dir)
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc["version"] != float64(1001) || doc["value"] != "a,b" || doc["found"] != true {
		t.Fatalf("get --versioned -o json: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "cache", "delete", "config", "ep", "--if-version", "7", "--data-dir", dir)
	if r.exitCode() != exitConditionRefused || !strings.Contains(r.message(), "version 1001") {
		t.Fatalf("stale delete --if-version: exit %d %q", r.exitCode(), r.message())
	}
	r = run(t, tk, nil, "cache", "delete", "config", "ep", "--if-version", "1001", "--data-dir", dir)
	if r.err != nil || r.stdout != "" {
		t.Fatalf("delete --if-version: %q, %v", r.stdout, r.err)
	}
	r = run(t, tk, nil, "cache", "get", "config", "ep", "--versioned", "-o", "json", "--data-dir", dir)
	if r.exitCode() != 1 || r.stdout != `{"cache":"config","found":false,"key":"ep"}`+"\n" {
		t.Fatalf("get --versioned of a deleted key: exit %d %q", r.exitCode(), r.stdout)
	}
}

// A conditional write whose answer was lost is reported, not retried.
func TestCachePutIfOutcomeUnknownIsNotRetried(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{condErr: &felix.BrokerError{Code: wire.CodeShardUnavailable, Retry: wire.RetryOutcomeUnknown,
		Message: "forwarded to b, the shard's owner, which did not answer", Detail: map[string]any{wire.DetailReason: "forward_unanswered"}}}
	r := run(t, fb.toolkit(), nil, "cache", "put", "leases", "e7", "me", "--if-absent", "--data-dir", t.TempDir())
	if r.exitCode() != exitGeneric || !strings.Contains(r.message(), "may have been applied") {
		t.Fatalf("exit %d %q", r.exitCode(), r.message())
	}
	if fb.condCalls != 1 {
		t.Fatalf("sent %d times", fb.condCalls)
	}
}

func TestCacheCondHelp(t *testing.T) {
	for _, args := range [][]string{{"cache", "put", "--help"}, {"cache", "delete", "--help"}, {"cache", "get", "--help"}} {
		r := run(t, toolkit{}, nil, args...)
		if r.err != nil || !strings.Contains(r.stdout, "version") {
			t.Fatalf("%v: %v\n%s", args, r.err, r.stdout)
		}
	}
	r := run(t, toolkit{}, nil, "cache", "put", "--help")
	for _, want := range []string{"--if-absent", "--if-version N", "exits with code 3"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("put --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// jsonDoc parses stdout as exactly one JSON document.
func jsonDoc(t *testing.T, stdout string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%q", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document: %q", stdout)
	}
	return doc
}

func TestPubReportsAcknowledgedOffsets(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{durable: true}
	r := run(t, fb.toolkit(), nil, "pub", "events", "a", "b", "c", "--ack", "--data-dir", dir)
	if r.err != nil || r.stdout != "offset 0\noffset 1\noffset 2\n" {
		t.Fatalf("text: %q %v", r.stdout, r.err)
	}
	r = run(t, fb.toolkit(), strings.NewReader("d\ne\n"), "pub", "events", "--stdin", "--ack", "-o", "json", "--data-dir", dir)
	doc := jsonDoc(t, r.stdout)
	if r.err != nil || doc["published"] != 2.0 || doc["acked"] != true || doc["stream"] != "events" {
		t.Fatalf("json: %v %v", doc, r.err)
	}
	if offs, _ := doc["offsets"].([]any); len(offs) != 2 || offs[0] != 3.0 || offs[1] != 4.0 {
		t.Fatalf("json offsets: %v", doc["offsets"])
	}
}

func TestPubJSONWithoutAck(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{durable: true}
	r := run(t, fb.toolkit(), nil, "pub", "events", "a", "b", "-o", "json", "--data-dir", t.TempDir())
	doc := jsonDoc(t, r.stdout)
	if r.err != nil || doc["published"] != 2.0 || doc["acked"] != false || doc["offsets"] != nil || fb.finished != 1 {
		t.Fatalf("json: %v %v (finished %d)", doc, r.err, fb.finished)
	}
	r = run(t, fb.toolkit(), nil, "pub", "events", "a", "--data-dir", t.TempDir())
	if r.err != nil || r.stdout != "" {
		t.Fatalf("text without --ack prints nothing: %q %v", r.stdout, r.err)
	}
}

func TestCachePutJSON(t *testing.T) {
	clearEnv(t)
	r := run(t, (&fakeBroker{}).toolkit(), nil, "cache", "put", "sessions", "k", "v", "--ttl", "30s", "-o", "json", "--data-dir", t.TempDir())
	doc := jsonDoc(t, r.stdout)
	if r.err != nil || doc["cache"] != "sessions" || doc["key"] != "k" || doc["stored"] != true || doc["ttl"] != "30s" {
		t.Fatalf("json: %v %v", doc, r.err)
	}
}

// TestMissingKeyIsTheSameForGetAndDelete: exit 1 and "not found" on
// stderr for both, and with -o json a document on stdout all the same.
func TestMissingKeyIsTheSameForGetAndDelete(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	for _, verb := range []string{"get", "delete"} {
		fb := &fakeBroker{cache: map[string]string{}}
		r := run(t, fb.toolkit(), nil, "cache", verb, "sessions", "absent", "--data-dir", dir)
		if r.exitCode() != exitGeneric || r.stdout != "" || !strings.Contains(r.message(), `not found: cache sessions has no key "absent"`) {
			t.Errorf("%s text: exit %d, stdout %q, message %q", verb, r.exitCode(), r.stdout, r.message())
		}
		r = run(t, fb.toolkit(), nil, "cache", verb, "sessions", "absent", "-o", "json", "--data-dir", dir)
		doc := jsonDoc(t, r.stdout)
		if r.exitCode() != exitGeneric || doc["found"] != false || doc["key"] != "absent" || doc["cache"] != "sessions" {
			t.Errorf("%s json: exit %d, %v", verb, r.exitCode(), doc)
		}
	}
}

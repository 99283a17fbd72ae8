package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

func TestSubJSONCarriesDurableFields(t *testing.T) {
	clearEnv(t)
	ts := time.Date(2026, 11, 29, 8, 0, 0, 123456000, time.UTC)
	start, live := uint64(40), uint64(45)
	fb := &fakeBroker{startOffset: &start, liveOffset: &live, events: []felix.Event{
		{Payload: []byte("a"), Offset: 40, HasOffset: true, SkippedBefore: 1, Timestamp: ts, Publisher: "svc"},
		{Payload: []byte{0xff}, Offset: 41, HasOffset: true},
	}}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--from", "earliest", "--count", "2", "-o", "json", "--data-dir", t.TempDir())
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := `{"offset":40,"payload":"a","publisher":"svc","shard":0,"skipped_before":1,"time":"2026-11-29T08:00:00.123456Z"}` + "\n" +
		`{"offset":41,"payload_base64":"/w==","shard":0}` + "\n"
	if r.stdout != want {
		t.Fatalf("got %q\nwant %q", r.stdout, want)
	}
	if r.stderr != "subscribed to events (shard 0) at offset 40 (live from offset 45)\n" {
		t.Fatalf("stderr %q", r.stderr)
	}
	if fb.subOpts.Start.Kind != wire.StartEarliest {
		t.Fatalf("start %+v", fb.subOpts.Start)
	}
}

func TestSubCursorErrorExitsNonZero(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{subErr: &felix.SubscribeCursorError{Reason: wire.CursorTooOld, TooOld: true, Requested: 5, Available: 100}}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--from", "5", "--data-dir", t.TempDir())
	want := "error: offset 5 is no longer kept (retention); the oldest available is 100 (code too_old)\n" +
		"hint: the nearest offset available is 100; start there with --from 100"
	if r.exitCode() != 1 || r.message() != want {
		t.Fatalf("exit %d %q", r.exitCode(), r.message())
	}
	fb = &fakeBroker{subErr: &felix.SubscribeCursorError{Reason: wire.CursorInFuture, Requested: 900, Available: 250}}
	r = run(t, fb.toolkit(), nil, "sub", "events", "--from", "900", "--data-dir", t.TempDir())
	if r.exitCode() != 1 || !strings.Contains(r.message(), "offset 900 is past the end of the stream; the next offset is 250 (code in_future)") {
		t.Fatalf("exit %d %q", r.exitCode(), r.message())
	}
}

func TestSubResubscribesAfterLag(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{
		events: []felix.Event{{Payload: []byte("a"), Offset: 3, HasOffset: true}},
		endErr: &felix.SubscriptionLagged{SubscriptionID: 9, ResumeFrom: 5},
		// The new subscription repeats offset 3 and goes on.
		resumeEvents: []felix.Event{{Payload: []byte("a"), Offset: 3, HasOffset: true}, {Payload: []byte("b"), Offset: 4, HasOffset: true}},
	}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--count", "2", "--data-dir", t.TempDir())
	if r.err != nil || r.stdout != "a\nb\n" {
		t.Fatalf("exit %d %q stdout %q", r.exitCode(), r.message(), r.stdout)
	}
	if fb.subCalls != 2 || fb.subOpts.Start != (wire.StartPosition{Kind: wire.StartOffset, Offset: 4}) {
		t.Fatalf("%d subscribes, last from %+v", fb.subCalls, fb.subOpts.Start)
	}
	if !strings.Contains(r.stderr, "subscribing again at offset 4") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestSubEndsOnOtherErrors(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{endErr: felix.ErrSubscriptionLost}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--data-dir", t.TempDir())
	if r.exitCode() != 1 || !strings.Contains(r.message(), "subscription lost") || fb.subCalls != 1 {
		t.Fatalf("exit %d %q after %d subscribes", r.exitCode(), r.message(), fb.subCalls)
	}
}

// durableRecords are offsets 10..16 without 13.
func durableRecords() []felix.Record {
	var recs []felix.Record
	for off := uint64(10); off < 17; off++ {
		if off == 13 {
			continue
		}
		recs = append(recs, felix.Record{Offset: off, Payload: fmt.Appendf(nil, "r%d", off),
			Timestamp: time.UnixMicro(int64(off) * 1_000_000).UTC(), Publisher: "p"})
	}
	return recs
}

func TestReadPagesUntilEnd(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{records: durableRecords()}
	r := run(t, fb.toolkit(), nil, "read", "events", "--from", "10", "--end", "16", "--shard", "3", "--data-dir", t.TempDir())
	if r.err != nil || r.stdout != "r10\nr11\nr12\nr14\nr15\n" {
		t.Fatalf("text: %q %v", r.stdout, r.err)
	}
	// Pages of two (the fake's cap), continuing from each page's next offset.
	var froms []uint64
	for _, c := range fb.reads {
		froms = append(froms, c.from)
		if c.shard != 3 || c.end == nil || *c.end != 16 || c.maxRecords != 0 {
			t.Fatalf("read call %+v", c)
		}
	}
	if fmt.Sprint(froms) != "[10 12 15]" {
		t.Fatalf("pages from %v", froms)
	}
}

func TestReadJSONFromEarliestToTail(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{records: durableRecords()}
	r := run(t, fb.toolkit(), nil, "read", "events", "--max-records", "4", "-o", "json", "--data-dir", t.TempDir())
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d records: %q", len(lines), r.stdout)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first["offset"] != float64(10) || first["payload"] != "r10" || first["publisher"] != "p" || first["time"] != "1970-01-01T00:00:10Z" {
		t.Fatalf("first record %v", first)
	}
	// earliest: the first read at 0 was too old, the next started at 10;
	// the last read found nothing more.
	if len(fb.reads) < 3 || fb.reads[0].from != 0 || fb.reads[1].from != 10 || fb.reads[1].maxRecords != 4 {
		t.Fatalf("reads %+v", fb.reads)
	}
}

func TestReadCountAndErrors(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{records: durableRecords()}
	r := run(t, fb.toolkit(), nil, "read", "events", "--from", "11", "--count", "3", "--data-dir", t.TempDir())
	if r.err != nil || r.stdout != "r11\nr12\nr14\n" {
		t.Fatalf("count: %q %v", r.stdout, r.err)
	}
	r = run(t, fb.toolkit(), nil, "read", "events", "--from", "3", "--data-dir", t.TempDir())
	if r.exitCode() != 1 || !strings.Contains(r.message(), "offset 3 is no longer kept (retention); the oldest available is 10") ||
		!strings.Contains(r.message(), "--from 10") {
		t.Fatalf("too old: exit %d %q", r.exitCode(), r.message())
	}
	for _, args := range [][]string{
		{"read", "events", "--from", "soon"},
		{"read", "events", "--from", "9", "--end", "3"},
		{"read"},
	} {
		if r := run(t, fb.toolkit(), nil, append(args, "--data-dir", t.TempDir())...); r.exitCode() != exitUsage {
			t.Errorf("%q: exit %d %q", args, r.exitCode(), r.message())
		}
	}
}

func TestOffsetForTime(t *testing.T) {
	clearEnv(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fb := &fakeBroker{times: map[int64]uint64{at.UnixMicro(): 48210}}
	dir := t.TempDir()
	for _, arg := range []string{"2026-01-01T00:00:00Z", "2026-01-01T01:00:00+01:00", fmt.Sprint(at.UnixMicro())} {
		r := run(t, fb.toolkit(), nil, "offset-for-time", "events", "--at", arg, "--data-dir", dir)
		if r.err != nil || r.stdout != "48210\n" {
			t.Fatalf("--at %s: %q %v", arg, r.stdout, r.err)
		}
	}
	r := run(t, fb.toolkit(), nil, "offset-for-time", "events", "--at", "2026-01-01T00:00:00Z", "-o", "json", "--data-dir", dir)
	if r.err != nil || r.stdout != `{"at":"2026-01-01T00:00:00Z","found":true,"offset":48210}`+"\n" {
		t.Fatalf("json: %q %v", r.stdout, r.err)
	}
	r = run(t, fb.toolkit(), nil, "offset-for-time", "events", "--at", "2030-01-01T00:00:00Z", "--data-dir", dir)
	if r.exitCode() != 1 || !strings.HasPrefix(r.message(), "none") || r.stdout != "" {
		t.Fatalf("none: exit %d %q %q", r.exitCode(), r.message(), r.stdout)
	}
	r = run(t, fb.toolkit(), nil, "offset-for-time", "events", "--at", "2030-01-01T00:00:00Z", "-o", "json", "--data-dir", dir)
	if r.err != nil || !strings.Contains(r.stdout, `"found":false`) {
		t.Fatalf("none json: %q %v", r.stdout, r.err)
	}
	for _, args := range [][]string{{"offset-for-time", "events"}, {"offset-for-time", "events", "--at", "yesterday"}} {
		if r := run(t, fb.toolkit(), nil, append(args, "--data-dir", dir)...); r.exitCode() != exitUsage {
			t.Errorf("%q: exit %d %q", args, r.exitCode(), r.message())
		}
	}
}

func TestAdminStreamUpdate(t *testing.T) {
	clearEnv(t)
	f, srv := startControlPlane(t)
	conn := adminArgs(t, srv)
	cmd := func(args ...string) result { return run(t, toolkit{}, nil, append(args, conn...)...) }
	if r := cmd("admin", "stream", "create", "events", "--durable", "--retention-age", "24h"); r.err != nil {
		t.Fatal(r.err)
	}
	r := cmd("admin", "stream", "update", "events", "--retention-bytes", "4096")
	if r.err != nil || r.stdout != "updated stream default/default/events: retention 4096 bytes, 24h0m0s, policy default\n" {
		t.Fatalf("update: %q %v", r.stdout, r.err)
	}
	s := f.streams["default/default/events"]
	if s.Retention.MaxSizeBytes == nil || *s.Retention.MaxSizeBytes != 4096 || s.Retention.MaxAgeSeconds == nil || *s.Retention.MaxAgeSeconds != 86400 {
		t.Fatalf("the age bound was not kept: %+v", s.Retention)
	}
	r = cmd("admin", "stream", "update", "events", "--retention-age", "0", "--policy", "block", "-o", "json")
	var spec wire.StreamSpec
	if err := json.Unmarshal([]byte(r.stdout), &spec); err != nil || r.err != nil {
		t.Fatalf("json %q: %v %v", r.stdout, err, r.err)
	}
	if spec.Retention.MaxAgeSeconds != nil || spec.Retention.MaxSizeBytes == nil || spec.SubQueuePolicy != "block" {
		t.Fatalf("after removing the age bound: %+v", spec)
	}
	r = cmd("admin", "stream", "update", "events", "--policy", "drop_old")
	if r.err != nil || f.patches[len(f.patches)-1].Retention != nil {
		t.Fatalf("a policy-only update sent retention: %+v %v", f.patches[len(f.patches)-1], r.err)
	}
	if r := cmd("admin", "stream", "update", "nope", "--retention-bytes", "1"); r.exitCode() != 1 || !strings.Contains(r.message(), "not_found") {
		t.Fatalf("missing: exit %d %q", r.exitCode(), r.message())
	}
	for _, args := range [][]string{
		{"admin", "stream", "update", "events"},
		{"admin", "stream", "update", "events", "--policy", "sometimes"},
		{"admin", "stream", "update", "events", "--retention-age", "-1h"},
	} {
		if r := cmd(args...); r.exitCode() != exitUsage {
			t.Errorf("%q: exit %d %q", args, r.exitCode(), r.message())
		}
	}
}

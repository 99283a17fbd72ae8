package cli

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// TestSubReadsEveryShard checks sub without --shard finds the stream's
// shards, prints the events of all of them (each line with its shard and
// offset under --positions), and says once it is subscribed to all.
func TestSubReadsEveryShard(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{shards: 3,
		events:       []felix.Event{{Payload: []byte("a"), Offset: 4, HasOffset: true}},
		resumeEvents: []felix.Event{{Payload: []byte("b"), Offset: 9, HasOffset: true}}, // shards 1 and 2
	}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--count", "3", "--positions", "--data-dir", t.TempDir())
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	slices.Sort(lines)
	want := []string{"shard=0 offset=4 a", "shard=1 offset=9 b", "shard=2 offset=9 b"}
	if !slices.Equal(lines, want) {
		t.Fatalf("stdout %q, want the lines %q", r.stdout, want)
	}
	if r.stderr != "subscribed to events (shards 0-2) from latest\n" {
		t.Fatalf("stderr %q", r.stderr)
	}
	if fb.subCalls != 3 {
		t.Fatalf("%d subscriptions, want one per shard", fb.subCalls)
	}
}

// TestSubFromOffsetNeedsShard checks --from OFFSET, which names an offset
// of one shard, is refused as a usage error on a stream of several shards
// unless --shard picks one, and starts at that offset (the first printed).
func TestSubFromOffsetNeedsShard(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{shards: 2}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--from", "5", "--data-dir", t.TempDir())
	if r.exitCode() != exitUsage || !strings.Contains(r.message(), "add --shard N") {
		t.Fatalf("exit %d %q", r.exitCode(), r.message())
	}
	fb = &fakeBroker{shards: 2, events: []felix.Event{{Payload: []byte("x"), Offset: 5, HasOffset: true}}}
	r = run(t, fb.toolkit(), nil, "sub", "events", "--from", "5", "--shard", "1", "--count", "1", "--data-dir", t.TempDir())
	if r.err != nil || r.stdout != "x\n" || fb.subOpts.Start != (wire.StartPosition{Kind: wire.StartOffset, Offset: 5}) || fb.subOpts.Shard != 1 {
		t.Fatalf("exit %d %q stdout %q opts %+v", r.exitCode(), r.message(), r.stdout, fb.subOpts)
	}
}

// TestSubResumesAfterConnectionLoss checks a durable sub whose connection
// is lost (a broker restart) connects again and carries on right after
// the last event it printed, with no gap and no repeat.
func TestSubResumesAfterConnectionLoss(t *testing.T) {
	clearEnv(t)
	start := uint64(10)
	fb := &fakeBroker{startOffset: &start,
		events: []felix.Event{{Payload: []byte("a"), Offset: 10, HasOffset: true}, {Payload: []byte("b"), Offset: 11, HasOffset: true}},
		endErr: felix.ErrConnectionLost,
		// The new subscription repeats offset 11 and goes on.
		resumeEvents: []felix.Event{{Payload: []byte("b"), Offset: 11, HasOffset: true}, {Payload: []byte("c"), Offset: 12, HasOffset: true}},
	}
	tk := fb.toolkit()
	dials := 0
	connect := tk.connect
	tk.connect = func(ctx context.Context, s Settings) (brokerClient, error) {
		dials++
		return connect(ctx, s)
	}
	r := run(t, tk, nil, "sub", "events", "--count", "3", "--data-dir", t.TempDir())
	if r.err != nil || r.stdout != "a\nb\nc\n" {
		t.Fatalf("exit %d %q stdout %q", r.exitCode(), r.message(), r.stdout)
	}
	if dials != 2 || fb.subOpts.Start != (wire.StartPosition{Kind: wire.StartOffset, Offset: 12}) {
		t.Fatalf("%d dials, last subscribe from %+v", dials, fb.subOpts.Start)
	}
	if !strings.Contains(r.stderr, "resuming at offset 12") || !strings.Contains(r.stderr, "resumed at offset 12") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// TestSubLostWithoutPositionEnds checks a subscription that cannot say
// where it stands (no offsets: not a durable stream) is not resumed,
// since carrying on from the tail could skip events silently.
func TestSubLostWithoutPositionEnds(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{events: []felix.Event{{Payload: []byte("a")}}, endErr: felix.ErrConnectionLost}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--data-dir", t.TempDir())
	if r.exitCode() != 1 || !strings.Contains(r.message(), "connection to the broker lost") || fb.subCalls != 1 {
		t.Fatalf("exit %d %q after %d subscribes", r.exitCode(), r.message(), fb.subCalls)
	}
}

// TestSubResumesWhenTheBrokerDrains checks a durable sub the broker ends
// with draining (it is shutting down) carries on on a new connection.
func TestSubResumesWhenTheBrokerDrains(t *testing.T) {
	clearEnv(t)
	start := uint64(0)
	fb := &fakeBroker{startOffset: &start,
		events:       []felix.Event{{Payload: []byte("a"), Offset: 0, HasOffset: true}},
		endErr:       &felix.BrokerError{Code: wire.CodeDraining, Retry: wire.RetryRetry, Message: "broker is shutting down"},
		resumeEvents: []felix.Event{{Payload: []byte("b"), Offset: 1, HasOffset: true}},
	}
	r := run(t, fb.toolkit(), nil, "sub", "events", "--count", "2", "--data-dir", t.TempDir())
	if r.err != nil || r.stdout != "a\nb\n" || fb.subOpts.Start != (wire.StartPosition{Kind: wire.StartOffset, Offset: 1}) {
		t.Fatalf("exit %d %q stdout %q from %+v", r.exitCode(), r.message(), r.stdout, fb.subOpts.Start)
	}
}

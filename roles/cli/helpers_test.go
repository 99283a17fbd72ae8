package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

var felixEnv = []string{
	"FELIX_BROKER_ADDR", "FELIX_CONTROLPLANE_URL", "FELIX_CA_FILE", "FELIX_TOKEN_FILE",
	"FELIX_TOKEN", "FELIX_TENANT", "FELIX_NAMESPACE", "FELIX_DATA_DIR",
	"FELIX_CLIENT_CONFIG", "FELIX_CONTEXT", "FELIX_CONNECT_TIMEOUT",
	"FELIX_TRANSPORT", "FELIX_BROKER_TCP_ADDR",
}

// clearEnv blanks every FELIX_* variable the commands read (an empty
// value counts as unset) for the duration of the test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range felixEnv {
		t.Setenv(k, "")
	}
	// No user config either: the tests' own settings only.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
}

type result struct {
	stdout, stderr string
	err            error
}

// exitCode is what serve.Main would exit with.
func (r result) exitCode() int {
	if r.err == nil {
		return 0
	}
	var ec cli.ExitCoder
	if errors.As(r.err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

func (r result) message() string {
	if r.err == nil {
		return ""
	}
	return r.err.Error()
}

// run runs a felix app holding the client commands on args (without the
// program name), after PermuteArgs, the way serve.Main does.
func run(t *testing.T, tk toolkit, stdin io.Reader, args ...string) result {
	t.Helper()
	return runCtx(context.Background(), tk, stdin, args...)
}

// runCtx is run with a context, for commands that end when it does.
func runCtx(ctx context.Context, tk toolkit, stdin io.Reader, args ...string) result {
	var out, errb bytes.Buffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	app := &cli.App{
		Name:           "felix",
		Commands:       commands(BuildInfo{Version: "1.2.3", Commit: "abc123", Date: "2026-11-29"}, tk),
		Writer:         &out,
		ErrWriter:      &errb,
		Reader:         stdin,
		HideVersion:    true,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.RunContext(ctx, PermuteArgs(app, append([]string{"felix"}, args...)))
	return result{stdout: out.String(), stderr: errb.String(), err: err}
}

// fakeBroker stands in for the Go client.
type fakeBroker struct {
	mu        sync.Mutex
	settings  Settings
	published []string
	keys      []string
	acks      []felix.AckMode
	durable   bool // acknowledged publishes report offsets
	finished  int
	closed    bool
	cache     map[string]string
	// versions holds each key's version, set by conditional puts
	// (cache_cond_test.go); condErr fails every conditional call.
	versions    map[string]uint64
	lastVersion uint64
	condErr     error
	condCalls   int
	// counters holds counter sums (counter_test.go); counterErr fails
	// every counter call.
	counters   map[string]int64
	counterErr error
	addCalls   int
	events     []felix.Event
	subOpts    felix.SubscribeOptions
	subStream  string
	// idle, when set, is closed once the subscription has handed out
	// every event and waits for more.
	idle chan struct{}
	// subErr fails SubscribeFrom; endErr ends the first subscription
	// after its events (instead of waiting for ctx). Later subscriptions
	// hand out resumeEvents.
	subErr, endErr error
	resumeEvents   []felix.Event
	subCalls       int
	// startOffset and liveOffset are what the subscription reports.
	startOffset, liveOffset *uint64
	// shards is the stream's width (0 is 1): SubscribeFrom refuses a
	// shard past it as the broker does.
	shards uint32
	// records is a durable shard for Read.
	records []felix.Record
	reads   []readCall
	// times maps OffsetForTime's µs to an offset; absent is "none".
	times map[int64]uint64
	// watch is what WatchCache serves (see cache_watch_test.go).
	watch fakeWatchSpec
	// commits are the commits the fake took and state what StateGet
	// answers, by key (commit_test.go).
	commits []fakeCommit
	state   map[string]fakeStateValue
}

// readCall is one Read the fake served.
type readCall struct {
	shard      uint32
	from       uint64
	end        *uint64
	maxRecords int
}

func (f *fakeBroker) toolkit() toolkit {
	return toolkit{connect: func(_ context.Context, s Settings) (brokerClient, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.settings = s
		return f, nil
	}}
}

func (f *fakeBroker) PublishAcked(ctx context.Context, ns, stream string, payload []byte, ack felix.AckMode) (felix.PublishResult, error) {
	return f.PublishKeyedAcked(ctx, ns, stream, nil, payload, ack)
}

// PublishKeyedAcked records the publish; an acknowledged one on a durable
// fake (durable set) reports its index in published as its offset.
func (f *fakeBroker) PublishKeyedAcked(_ context.Context, ns, stream string, key, payload []byte, ack felix.AckMode) (felix.PublishResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, string(payload))
	f.keys = append(f.keys, string(key))
	f.acks = append(f.acks, ack)
	if ack == felix.AckNone || !f.durable {
		return felix.PublishResult{}, nil
	}
	return felix.PublishResult{Offset: uint64(len(f.published) - 1), HasOffset: true}, nil
}

func (f *fakeBroker) SubscribeFrom(_ context.Context, ns, stream string, o felix.SubscribeOptions) (eventSource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o.Shard >= max(f.shards, 1) {
		return nil, &felix.BrokerError{Code: wire.CodeInvalidRequest, Retry: wire.RetryFatal, Message: "shard out of range",
			Detail: map[string]any{"reason": "shard_out_of_range", "shards": max(f.shards, 1)}}
	}
	f.subOpts, f.subStream = o, stream
	if f.subErr != nil {
		return nil, f.subErr
	}
	f.subCalls++
	if f.subCalls > 1 {
		return &fakeSub{events: f.resumeEvents, idle: f.idle}, nil
	}
	return &fakeSub{events: f.events, idle: f.idle, endErr: f.endErr, start: f.startOffset, live: f.liveOffset}, nil
}

// Read serves pages of f.records (at most 2 per page when maxRecords is
// 0), with cursor errors outside [first, tail].
func (f *fakeBroker) Read(_ context.Context, ns, stream string, shard uint32, from uint64, end *uint64, maxRecords int) (*felix.ReadPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, readCall{shard, from, end, maxRecords})
	first, tail := uint64(0), uint64(0)
	if n := len(f.records); n > 0 {
		first, tail = f.records[0].Offset, f.records[n-1].Offset+1
	}
	switch {
	case from < first:
		return nil, &felix.SubscribeCursorError{Reason: wire.CursorTooOld, TooOld: true, Requested: from, Available: first}
	case from > tail:
		return nil, &felix.SubscribeCursorError{Reason: wire.CursorInFuture, Requested: from, Available: tail}
	}
	if maxRecords == 0 {
		maxRecords = 2
	}
	page := &felix.ReadPage{NextOffset: from}
	for _, r := range f.records {
		if r.Offset < from || (end != nil && r.Offset >= *end) || len(page.Records) == maxRecords {
			continue
		}
		page.Records = append(page.Records, r)
		page.NextOffset = r.Offset + 1
	}
	return page, nil
}

func (f *fakeBroker) OffsetForTime(_ context.Context, ns, stream string, shard uint32, t time.Time) (uint64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	off, ok := f.times[t.UnixMicro()]
	return off, ok, nil
}

func (f *fakeBroker) CachePut(_ context.Context, ns, cache, key string, value []byte, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cache == nil {
		f.cache = map[string]string{}
	}
	f.cache[cache+"/"+key] = string(value)
	return nil
}

func (f *fakeBroker) CacheGet(_ context.Context, ns, cache, key string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.cache[cache+"/"+key]
	return []byte(v), ok, nil
}

func (f *fakeBroker) CacheDelete(_ context.Context, ns, cache, key string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.cache[cache+"/"+key]
	delete(f.cache, cache+"/"+key)
	return []byte(v), ok, nil
}

func (f *fakeBroker) Finish(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished++
	return nil
}

func (f *fakeBroker) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// fakeSub hands out its events, then fails with endErr or blocks until
// ctx ends.
type fakeSub struct {
	events      []felix.Event
	idle        chan struct{}
	endErr      error
	start, live *uint64
	closed      bool
}

func (s *fakeSub) StartOffset() (uint64, bool) { return deref(s.start) }
func (s *fakeSub) LiveOffset() (uint64, bool)  { return deref(s.live) }

func deref(p *uint64) (uint64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

func (s *fakeSub) Next(ctx context.Context) (felix.Event, error) {
	if len(s.events) > 0 {
		ev := s.events[0]
		s.events = s.events[1:]
		return ev, nil
	}
	if s.endErr != nil {
		return felix.Event{}, s.endErr
	}
	if s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	<-ctx.Done()
	return felix.Event{}, ctx.Err()
}

func (s *fakeSub) Close() error { s.closed = true; return nil }

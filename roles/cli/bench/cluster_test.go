package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

func TestKeysForShardsCoverEveryShardOnce(t *testing.T) {
	for n := uint32(1); n <= 32; n++ {
		keys := keysForShards(n)
		if len(keys) != int(n) {
			t.Fatalf("%d shards: %d keys", n, len(keys))
		}
		for i, k := range keys {
			if got := wire.ShardForKey(k, n); got != uint32(i) {
				t.Fatalf("%d shards: key %q lands on shard %d, want %d", n, k, got, i)
			}
		}
	}
}

func TestNewRouting(t *testing.T) {
	for _, tc := range []struct {
		name, route, via string
		shards           int
		metrics          []string
		wantErr          string
		wantMetrics      []string
		wantKeys         int
	}{
		{name: "default", shards: 1},
		{name: "direct keyed", route: "direct", shards: 3, wantKeys: 3},
		{name: "entry via", route: "entry", via: "127.0.0.1:5000", shards: 6, wantKeys: 6},
		{name: "one broker keyed", shards: 3, wantKeys: 3},
		{name: "metrics split", route: "entry", shards: 1, metrics: []string{"a:1,b:2", " c:3 ", ""}, wantMetrics: []string{"a:1", "b:2", "c:3"}},
		{name: "unknown route", route: "sideways", shards: 1, wantErr: "--route"},
		{name: "via without entry", route: "direct", via: "x:1", shards: 1, wantErr: "--via"},
		{name: "via alone", via: "x:1", shards: 1, wantErr: "--via"},
		{name: "no shards", shards: 0, wantErr: "--shards"},
		{name: "too many shards", shards: maxBenchShards + 1, wantErr: "--shards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newRouting(tc.route, tc.via, tc.shards, tc.metrics)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error about %s, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.keys) != tc.wantKeys || r.keyed() != (tc.wantKeys > 0) {
				t.Fatalf("%d keys, keyed %v; want %d", len(r.keys), r.keyed(), tc.wantKeys)
			}
			if !slices.Equal(r.metrics, tc.wantMetrics) {
				t.Fatalf("metrics %q, want %q", r.metrics, tc.wantMetrics)
			}
			if r.cluster() != (tc.route != "") {
				t.Fatalf("cluster() = %v for route %q", r.cluster(), tc.route)
			}
		})
	}
}

// The default routing leaves a result's parameters as they were before
// clusters, so the scenarios print what they printed.
func TestRoutingParams(t *testing.T) {
	params := map[string]any{}
	routing{shards: 1}.addParams(params)
	if len(params) != 0 {
		t.Fatalf("default routing added %v", params)
	}
	r, err := newRouting("entry", "h:1", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.addParams(params)
	if params["route"] != "entry" || params["via"] != "h:1" || params["shards"] != 3 {
		t.Fatalf("params %v", params)
	}
}

func TestRouteHint(t *testing.T) {
	nl := &felix.NotLeaderError{}
	cluster := &target{brokers: []string{"a:1", "b:1"}}
	if err := cluster.routeHint(nl); !strings.Contains(err.Error(), "--route") || !errors.As(err, &nl) {
		t.Fatalf("a cluster without --route: %v", err)
	}
	one := &target{brokers: []string{"a:1"}}
	if err := one.routeHint(nl); err != error(nl) {
		t.Fatalf("one broker: %v", err)
	}
	routed := &target{brokers: []string{"a:1", "b:1"}, routing: routing{route: routeDirect, shards: 1}}
	if err := routed.routeHint(nl); err != error(nl) {
		t.Fatalf("with --route: %v", err)
	}
}

func TestAddCountersSumsEveryLabelSet(t *testing.T) {
	const page = `# HELP felix_broker_forwarded_publishes_total Publishes this broker forwarded.
# TYPE felix_broker_forwarded_publishes_total counter
felix_broker_forwarded_publishes_total 120
felix_broker_forwarded_publishes_total_other 7
felix_broker_forward_failures_total{reason="dropped"} 2
felix_broker_forward_failures_total{reason="unreachable"} 3
felix_broker_forwarded_cache_ops_total 9
`
	sum := map[string]float64{metricForwarded: 1}
	if err := addCounters(bufio.NewScanner(strings.NewReader(page)), sum); err != nil {
		t.Fatal(err)
	}
	if sum[metricForwarded] != 121 || sum[metricForwardFailures] != 5 {
		t.Fatalf("sums %v", sum)
	}
	r := &result{}
	addForwarded(r, map[string]float64{metricForwarded: 100}, sum)
	if len(r.Figures) != 2 || r.Figures[0].Value != 21 || r.Figures[1].Value != 5 {
		t.Fatalf("figures %+v", r.Figures)
	}
	r = &result{}
	addForwarded(r, nil, sum)
	if len(r.Figures) != 0 {
		t.Fatal("no figures without a reading before the run")
	}
}

// fakePub records what publishFor sends.
type fakePub struct {
	mu      sync.Mutex
	keyed   map[string]int
	batches int
	singles int
}

func (f *fakePub) Publish(context.Context, string, string, []byte, felix.AckMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.singles++
	return nil
}

func (f *fakePub) PublishBatch(context.Context, string, string, [][]byte, felix.AckMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches++
	return nil
}

func (f *fakePub) PublishKeyed(_ context.Context, _, _ string, key, _ []byte, _ felix.AckMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keyed[string(key)]++
	return nil
}

func (f *fakePub) Finish(context.Context) error { return nil }
func (f *fakePub) Close() error                 { return nil }

// runPublishFor runs publishFor against a fake publisher until it has
// published at least n times, then stops it.
func runPublishFor(p pubsubParams, keys [][]byte, n int64) *fakePub {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakePub{keyed: map[string]int{}}
	var ok atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		publishFor(ctx, f, "ns", "s", p, keys, &ok)
	}()
	for ok.Load() < n {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	return f
}

func TestPublishForTakesTheKeysInTurn(t *testing.T) {
	keys := keysForShards(3)
	f := runPublishFor(pubsubParams{payload: 8, batch: 1, duration: time.Hour}, keys, 300)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.batches != 0 || f.singles != 0 {
		t.Fatalf("unkeyed publishes: %d batches, %d singles", f.batches, f.singles)
	}
	lo, hi := int(^uint(0)>>1), 0
	for _, k := range keys {
		lo, hi = min(lo, f.keyed[string(k)]), max(hi, f.keyed[string(k)])
	}
	if lo == 0 || hi-lo > 1 {
		t.Fatalf("keys not taken in turn: %v", f.keyed)
	}
}

func TestPublishForWithoutKeysSendsBatches(t *testing.T) {
	f := runPublishFor(pubsubParams{payload: 8, batch: 4, duration: time.Hour}, nil, 40)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.keyed) != 0 || f.singles != 0 || f.batches == 0 {
		t.Fatalf("keyed %v, singles %d, batches %d", f.keyed, f.singles, f.batches)
	}
}

// The routing flags are on the publishing scenarios only, and a bad one is
// a usage error before anything is dialled.
func TestRoutingFlagsOnPublishingScenarios(t *testing.T) {
	withRouting := []string{"pubsub", "durable", "latency"}
	for _, sc := range Command().Subcommands {
		has := slices.ContainsFunc(sc.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), "route") })
		if want := slices.Contains(withRouting, sc.Name); has != want {
			t.Errorf("%s: has --route %v, want %v", sc.Name, has, want)
		}
	}
	for _, scenario := range withRouting {
		for _, args := range [][]string{
			{"--route", "sideways"},
			{"--via", "127.0.0.1:1"},
			{"--shards", "0"},
		} {
			var out, errOut bytes.Buffer
			app := &cli.App{Name: "felix", Commands: []*cli.Command{Command()}, Writer: &out, ErrWriter: &errOut,
				ExitErrHandler: func(*cli.Context, error) {}}
			argv := append([]string{"felix", "bench", scenario, "--broker", "127.0.0.1:1", "--token-file", "/nonexistent"}, args...)
			err := app.Run(argv)
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 2 {
				t.Errorf("%v: want a usage error (exit 2), got %v", args, err)
			}
		}
	}
}

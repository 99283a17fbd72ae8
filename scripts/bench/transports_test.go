package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseTransports(t *testing.T) {
	for in, want := range map[string]string{
		"quic,tcp": "quic,tcp", "tcp,quic": "quic,tcp", "tcp": "tcp", " QUIC ": "quic", "tcp,tcp": "tcp",
	} {
		got, err := parseTransports(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("parseTransports(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "udp", "quic,", "quic;tcp"} {
		if got, err := parseTransports(in); err == nil {
			t.Errorf("parseTransports(%q) = %v, want an error", in, got)
		}
	}
}

func TestTransportFlagAndEnv(t *testing.T) {
	t.Setenv("BENCH_TRANSPORTS", "")
	os.Unsetenv("BENCH_TRANSPORTS")
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", nil, "quic,tcp"},
		{"", []string{"--smoke"}, "quic,tcp"},
		{"", []string{"--transports", "quic"}, "quic"},
		{"tcp", nil, "tcp"},
		{"tcp", []string{"--transports", "quic,tcp"}, "quic,tcp"}, // the flag wins
	} {
		if tc.env == "" {
			os.Unsetenv("BENCH_TRANSPORTS")
		} else {
			os.Setenv("BENCH_TRANSPORTS", tc.env)
		}
		o, err := parseFlags(tc.args)
		if err != nil || strings.Join(o.transports, ",") != tc.want {
			t.Errorf("env %q args %v: transports %v, %v; want %s", tc.env, tc.args, o.transports, err, tc.want)
		}
	}
	os.Unsetenv("BENCH_TRANSPORTS")
	if _, err := parseFlags([]string{"--transports", "sctp"}); err == nil {
		t.Error("--transports sctp accepted")
	}
}

func TestRenderTableTwoTransports(t *testing.T) {
	both := []string{transportQUIC, transportTCP}
	s1 := &Series{Workload: "pubsub-4k", Case: "4 KiB", Metric: "delivered", Unit: "MB/s", Peer: "NATS core", Transports: both,
		Rounds: []Round{{Felix: f(100), FelixTCP: f(300), Peer: f(200)}, {Felix: f(150), FelixTCP: f(250), Peer: f(250)}}}
	s2 := &Series{Workload: "quic-raw", Case: "one stream", Metric: "received", Unit: "MB/s", Transports: []string{transportQUIC},
		NoTCP: "QUIC alone", Rounds: []Round{{Felix: f(400)}}}
	s3 := &Series{Workload: "fanout", Case: "N=10", Metric: "p99", Unit: "ms", Lower: true, Peer: "NATS core", Transports: both,
		Rounds: []Round{{Felix: f(2), FelixTCPErr: "felix fanout: exit status 1 | dial", Peer: f(1)}}}
	s4 := &Series{Workload: "watch-fanout", Metric: "—", Peer: "etcd watch", Pending: "later"}
	for _, s := range []*Series{s1, s2, s3, s4} {
		s.summarizeAll()
	}
	lines := strings.Split(strings.TrimSpace(renderTable([]*Series{s1, s2, s3, s4}, both)), "\n")
	want := []string{
		"| workload | case | metric | Felix QUIC median (min–max) | Felix TCP median (min–max) | peer | peer median (min–max) | QUIC/peer median (min–max) | TCP/peer median (min–max) |",
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
		"| pubsub-4k | 4 KiB | delivered (MB/s) | 125 (100–150) | 275 (250–300) | NATS core | 225 (200–250) | 0.55 (0.50–0.60) | 1.25 (1.00–1.50) |",
		"| quic-raw | one stream | received (MB/s) | 400 | n/a: QUIC alone | — | — | — | — |",
		"| fanout | N=10 | p99 (ms), lower is better | 2.00 | failed: felix fanout: exit status 1 / dial | NATS core | 1.00 | 2.00 | — |",
		"| watch-fanout | — | — | pending: later | — | etcd watch | — | — | — |",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
	// TCP alone: one Felix column and one ratio column.
	tcp := strings.Split(renderTable([]*Series{s1}, []string{transportTCP}), "\n")
	if tcp[0] != "| workload | case | metric | Felix TCP median (min–max) | peer | peer median (min–max) | TCP/peer median (min–max) |" ||
		tcp[2] != "| pubsub-4k | 4 KiB | delivered (MB/s) | 275 (250–300) | NATS core | 225 (200–250) | 1.25 (1.00–1.50) |" {
		t.Errorf("tcp-only table:\n%s", strings.Join(tcp, "\n"))
	}
}

func TestCompletePerTransport(t *testing.T) {
	both := []string{transportQUIC, transportTCP}
	s := &Series{Peer: "nats", Transports: both, Rounds: []Round{{Felix: f(1), FelixTCPErr: "down", Peer: f(1)}}}
	if s.complete() || s.incomplete() != "felix tcp" {
		t.Errorf("a series without its TCP figure: complete %v, missing %q", s.complete(), s.incomplete())
	}
	s = &Series{Peer: "nats", Transports: []string{transportTCP}, Rounds: []Round{{FelixTCP: f(1), Peer: f(1)}}}
	if !s.complete() {
		t.Errorf("a TCP-only series with its figures is complete; missing %q", s.incomplete())
	}
	s = &Series{Peer: "nats", Rounds: []Round{{Felix: f(1)}}} // results from before TCP
	if s.complete() || s.incomplete() != "peer" {
		t.Errorf("old series: complete %v, missing %q", s.complete(), s.incomplete())
	}
}

// Results written before the TCP transport still load and render, QUIC alone.
func TestOldResultsRender(t *testing.T) {
	old := `{"rounds":1,"series":[{"workload":"pubsub-4k","case":"c","metric":"delivered","unit":"MB/s","peer":"NATS",
		"rounds":[{"felix":100,"peer":200}],"felix_summary":{"n":1,"median":100,"min":100,"max":100},
		"peer_summary":{"n":1,"median":200,"min":200,"max":200},"ratio_summary":{"n":1,"median":0.5,"min":0.5,"max":0.5}}]}`
	var rep Report
	if err := json.Unmarshal([]byte(old), &rep); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(renderTable(rep.Series, rep.Transports), "\n")[2]
	if want := "| pubsub-4k | c | delivered (MB/s) | 100 | NATS | 200 | 0.50 |"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// runWorkload runs each case over QUIC, then TCP, then the peer, every
// round; a case without a TCP variant runs once, without --transport.
func TestRunWorkloadOrder(t *testing.T) {
	var calls []string
	m := metric{"x", "u", false, "x", "x"}
	felixSide := func(name string) felixRun {
		return func(ctx context.Context, e *env, tr string) (figures, error) {
			calls = append(calls, name+" felix "+tr)
			v := 1.0
			if tr == transportTCP {
				v = 2
			}
			return figures{"x": v}, nil
		}
	}
	peerSide := func(name string) func(context.Context, *env) (figures, error) {
		return func(context.Context, *env) (figures, error) {
			calls = append(calls, name+" peer")
			return figures{"x": 4}, nil
		}
	}
	w := workload{name: "w", peer: "p", cases: func(*options) []caseSpec {
		return []caseSpec{
			{name: "a", metrics: []metric{m}, felix: felixSide("a"), peer: peerSide("a")},
			{name: "raw", metrics: []metric{{"x", "u", false, "x", ""}}, felix: felixSide("raw"), noTCP: "QUIC alone"},
		}
	}}
	run := func(transports []string) []*Series {
		calls = nil
		e := &env{o: &options{rounds: 2, warmup: 1, transports: transports}, p: newProcs(), warnings: map[string]string{}}
		return runWorkload(context.Background(), e, w)
	}
	series := run([]string{transportQUIC, transportTCP})
	round := []string{"a felix quic", "a felix tcp", "a peer", "raw felix "}
	var want []string
	for range 3 {
		want = append(want, round...)
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls:\n%v\nwant\n%v", calls, want)
	}
	a, raw := series[0], series[1]
	if len(a.Rounds) != 2 || a.Ratio.Median != 0.25 || a.RatioTCP.Median != 0.5 || !a.complete() {
		t.Errorf("case a: %+v ratio %+v tcp %+v", a.Rounds, a.Ratio, a.RatioTCP)
	}
	if !slices.Equal(raw.Transports, []string{transportQUIC}) || raw.NoTCP == "" || raw.Felix.Median != 1 || !raw.complete() {
		t.Errorf("case raw: %+v", raw)
	}
	series = run([]string{transportTCP})
	if want := []string{"a felix tcp", "a peer", "a felix tcp", "a peer", "a felix tcp", "a peer"}; !slices.Equal(calls, want) {
		t.Fatalf("tcp only, calls %v, want %v", calls, want)
	}
	if len(series) != 1 || series[0].Felix != nil || series[0].FelixTCP.Median != 2 || !series[0].complete() {
		t.Errorf("tcp only: %+v", series)
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 50 ticks: 3 s.
	stat := "4242 (felix (serve) x) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 50 0 0 20 0 12 0 100 2000000 3000 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Fatalf("parseStatCPU = %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"", "42 no name S 1", "42 (x) S 1 2 3", "42 (x) S 1 2 3 4 5 6 7 8 9 10 u 5"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) gave no error", bad)
		}
	}
	own, err := procCPU(os.Getpid())
	if err != nil || own < 0 {
		t.Fatalf("procCPU(self) = %v, %v", own, err)
	}
}

func TestWithServerCPU(t *testing.T) {
	fig, err := withServerCPU(os.Getpid(), func() (figures, error) { return figures{"delivered": 1000}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := fig[cpuPerDelivery]; !ok || v < 0 {
		t.Fatalf("figures %v: want %s", fig, cpuPerDelivery)
	}
	fig, _ = withServerCPU(os.Getpid(), func() (figures, error) { return figures{"delivered": 0}, nil })
	if _, ok := fig[cpuPerDelivery]; ok {
		t.Errorf("no deliveries should give no CPU figure: %v", fig)
	}
}

package main

import (
	"strings"
	"testing"
)

func TestRenderTable(t *testing.T) {
	s1 := &Series{Workload: "pubsub-4k", Case: "4 KiB", Metric: "delivered", Unit: "MB/s", Peer: "NATS core",
		Rounds: []Round{{Felix: f(100), Peer: f(200)}, {Felix: f(150), Peer: f(250)}, {Felix: f(120), Peer: f(300)}}}
	s2 := &Series{Workload: "quic-raw", Metric: "received", Unit: "MB/s", Rounds: []Round{{Felix: f(400)}}}
	s3 := &Series{Workload: "watch-fanout", Metric: "—", Peer: "etcd watch", Pending: "no cache watch yet"}
	s4 := &Series{Workload: "meta", Metric: "creates", Unit: "creates/s", Peer: "etcd",
		Rounds: []Round{{Felix: f(900), PeerErr: "etcd member m1 exited | badly"}}}
	for _, s := range []*Series{s1, s2, s3, s4} {
		s.summarizeAll()
	}
	out := renderTable([]*Series{s1, s2, s3, s4}, nil)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 {
		t.Fatalf("want header, rule and 4 rows, got:\n%s", out)
	}
	for i, want := range []string{
		"| pubsub-4k | 4 KiB | delivered (MB/s) | 120 (100–150) | NATS core | 250 (200–300) | 0.50 (0.40–0.60) |",
		"| quic-raw | — | received (MB/s) | 400 | — | — | — |",
		"| watch-fanout | — | — | pending: no cache watch yet | etcd watch | — | — |",
		"| meta | — | creates (creates/s) | 900 | etcd | failed: etcd member m1 exited / badly | — |",
	} {
		if lines[i+2] != want {
			t.Errorf("row %d:\n got %s\nwant %s", i, lines[i+2], want)
		}
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.01234: "0.0123", 1.234: "1.23", 12.34: "12.3", 1234.5: "1234", 1e7: "10000000"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestCommandLineQuotes(t *testing.T) {
	got := commandLine([]string{"--workloads", "pubsub-4k,fanout", "--json", "my file.json", "--x", "it's"})
	want := `scripts/bench/run --workloads pubsub-4k,fanout --json 'my file.json' --x 'it'\''s'`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestParseFlagsSmokeDefaults(t *testing.T) {
	o, err := parseFlags([]string{"--smoke"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.workloads, ",") != "pubsub-4k,fanout" || o.rounds != 1 || o.warmup != 0 || len(o.fanoutNs) != 1 || o.fanoutNs[0] != 10 {
		t.Fatalf("smoke options = %+v", o)
	}
	if o, err = parseFlags([]string{"--smoke", "--rounds", "2"}); err != nil || o.rounds != 2 {
		t.Fatalf("an explicit flag should win over --smoke: %+v %v", o, err)
	}
	if _, err := parseFlags([]string{"--workloads", "nope"}); err == nil {
		t.Fatal("unknown workload accepted")
	}
	o, err = parseFlags(nil)
	if err != nil || len(o.workloads) != len(allWorkloads())-len(onlyNamed()) || o.rounds != 3 || o.warmup != 1 {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplaceBetweenMarkers(t *testing.T) {
	doc := "# Benchmarks\n\nhand-written\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\n## After\nkept\n"
	got, err := replaceBetweenMarkers(doc, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nhand-written\n\n" + beginMarker + "\nnew table\n" + endMarker + "\n\n## After\nkept\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	again, err := replaceBetweenMarkers(got, "new table\n")
	if err != nil || again != got {
		t.Fatalf("replacing twice should be stable:\n%s", again)
	}
}

func TestReplaceAppendsWhenAbsent(t *testing.T) {
	got, err := replaceBetweenMarkers("# Benchmarks\nold", "table")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Benchmarks\nold\n\n" + beginMarker + "\ntable\n" + endMarker + "\n"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if got, _ := replaceBetweenMarkers("", "t"); got != beginMarker+"\nt\n"+endMarker+"\n" {
		t.Fatalf("empty doc: %q", got)
	}
}

func TestReplaceRefusesBrokenMarkers(t *testing.T) {
	for _, doc := range []string{
		beginMarker + "\nno end\n",
		"no begin\n" + endMarker,
		endMarker + "\n" + beginMarker,
		beginMarker + endMarker + beginMarker + endMarker,
	} {
		if _, err := replaceBetweenMarkers(doc, "x"); err == nil {
			t.Errorf("accepted %q", doc)
		}
	}
}

func TestWriteDocsKeepsTheRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nprose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := &Report{Command: "scripts/bench/run --smoke", Rounds: 1,
		Machine: Machine{CPU: "Test CPU", Cores: 2, Kernel: "Linux 6", Go: "go1.26", Felix: "felix dev abc",
			Modules: map[string]string{"github.com/nats-io/nats-server/v2": "v2.15.2"}},
		Series: []*Series{{Workload: "quic-raw", Metric: "received", Unit: "MB/s", Note: "ceiling", Rounds: []Round{{Felix: f(1)}}}}}
	rep.Series[0].summarizeAll()
	if err := writeDocs(path, docsSection(rep)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	s := string(b)
	for _, want := range []string{"# Benchmarks\n\nprose\n", beginMarker, endMarker, "`scripts/bench/run --smoke`",
		"Test CPU, 2 cores, Linux 6", "NATS server v2.15.2", "| quic-raw |", "- quic-raw: ceiling"} {
		if !strings.Contains(s, want) {
			t.Errorf("docs lack %q:\n%s", want, s)
		}
	}
}

func TestDocsSectionTwoTransports(t *testing.T) {
	rep := &Report{Command: "scripts/bench/run", Rounds: 1, Transports: []string{transportQUIC, transportTCP},
		Series: []*Series{{Workload: "pubsub-4k", Metric: cpuMetric.label, Unit: cpuMetric.unit, Peer: "NATS",
			Transports: []string{transportQUIC, transportTCP}, Rounds: []Round{{Felix: f(20), FelixTCP: f(10), Peer: f(10)}}}}}
	rep.Series[0].summarizeAll()
	s := docsSection(rep)
	for _, want := range []string{"Felix over QUIC, then over TCP", "Felix TCP median (min–max)", "TCP/peer median",
		"| 20.0 | 10.0 | NATS | 10.0 | 2.00 | 1.00 |", "Broker CPU per delivery is"} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
}

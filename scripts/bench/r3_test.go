package main

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestWithServersCPUDividesByAckedMB(t *testing.T) {
	pid := os.Getpid()
	f, err := withServersCPU([]int{pid, pid}, "acked", 1000, func() (figures, error) {
		for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		}
		return figures{"acked": 2000}, nil // 2 MB
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two copies of this process's CPU, at least ~50 ms between them at
	// the clock's 10 ms resolution, over 2 MB.
	if got := f[cpuPerMB]; got < 10 {
		t.Errorf("%s = %v ms/MB, want at least 10", cpuPerMB, got)
	}
	f, _ = withServersCPU([]int{pid}, "acked", 1000, func() (figures, error) { return figures{"acked": 0}, nil })
	if _, ok := f[cpuPerMB]; ok {
		t.Errorf("a run that acknowledged nothing got %s", cpuPerMB)
	}
}

func TestDurableAckedR3IsListedButNotSmoke(t *testing.T) {
	var w *workload
	for _, x := range allWorkloads() {
		if x.name == "durable-acked-r3" {
			w = &x
		}
	}
	if w == nil {
		t.Fatal("durable-acked-r3 is not a workload")
	}
	o, err := parseFlags([]string{"--smoke"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(o.workloads, "durable-acked-r3") {
		t.Error("--smoke runs durable-acked-r3 (it takes over 20 s)")
	}
	cs := w.cases(o)
	if len(cs) != 2 {
		t.Fatalf("%d cases, want always and periodic", len(cs))
	}
	for _, c := range cs {
		if c.noTCP != "" || c.peer == nil || !slices.Contains(c.metrics, cpuPerMBMetric) {
			t.Errorf("case %q: noTCP %q, peer %v, metrics %v", c.name, c.noTCP, c.peer != nil, c.metrics)
		}
	}
	if o, err := parseFlags([]string{"--workloads", "durable-acked-r3", "--rounds", "1", "--transports", "quic"}); err != nil ||
		!slices.Equal(o.workloads, []string{"durable-acked-r3"}) {
		t.Errorf("--workloads durable-acked-r3: %v, %v", o, err)
	}
}

package main

import (
	"errors"
	"slices"
	"testing"
)

func TestPairFiguresNamesBothRunsAndTheirRatio(t *testing.T) {
	f, err := pairFigures(figures{"published_msgs_per_s": 900, "other": 1}, figures{"published_msgs_per_s": 1000},
		"published_msgs_per_s", idemMsgs, idemPlainMsgs, idemOverPlain)
	if err != nil {
		t.Fatal(err)
	}
	if f[idemMsgs] != 900 || f[idemPlainMsgs] != 1000 || f[idemOverPlain] != 0.9 || len(f) != 3 {
		t.Errorf("figures %v", f)
	}
	f, err = pairFigures(figures{"k": 5}, figures{"k": 0}, "k", "a", "b", "r")
	if _, ok := f["r"]; err != nil || ok {
		t.Errorf("a plain run of 0 gives no ratio: %v, %v", f, err)
	}
	if _, err := pairFigures(figures{"k": 5}, figures{}, "k", "a", "b", "r"); err == nil {
		t.Error("a missing figure was not an error")
	}
}

func TestRunPairSwapsTheOrderButNotTheNames(t *testing.T) {
	for _, plainFirst := range []bool{false, true} {
		var order []string
		run := func(name string, v float64) func() (figures, error) {
			return func() (figures, error) { order = append(order, name); return figures{"k": v}, nil }
		}
		f, err := runPair(plainFirst, run("mode", 3), run("plain", 4), "k", "m", "p", "r")
		if err != nil || f["m"] != 3 || f["p"] != 4 || f["r"] != 0.75 {
			t.Errorf("plainFirst %v: %v, %v", plainFirst, f, err)
		}
		want := []string{"mode", "plain"}
		if plainFirst {
			want = []string{"plain", "mode"}
		}
		if !slices.Equal(order, want) {
			t.Errorf("plainFirst %v ran %v", plainFirst, order)
		}
	}
	calls := 0
	boom := func() (figures, error) { calls++; return nil, errors.New("boom") }
	if _, err := runPair(false, boom, boom, "k", "m", "p", "r"); err == nil || calls != 1 {
		t.Errorf("a failed first run: %v after %d calls", err, calls)
	}
}

func TestIssue19WorkloadsAreListedButNotSmoke(t *testing.T) {
	o, err := parseFlags([]string{"--smoke"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]workload{}
	for _, w := range allWorkloads() {
		byName[w.name] = w
	}
	for name, cases := range map[string]int{"group": 2, "group-latency": 1, "durable-idempotent": 1} {
		w, ok := byName[name]
		if !ok {
			t.Errorf("%s is not a workload", name)
			continue
		}
		if slices.Contains(o.workloads, name) {
			t.Errorf("--smoke runs %s", name)
		}
		if w.onlyNamed != "" {
			t.Errorf("%s runs only when named", name)
		}
		cs := w.cases(o)
		if len(cs) != cases {
			t.Errorf("%s has %d cases, want %d", name, len(cs), cases)
		}
		for _, c := range cs {
			if c.noTCP != "" || c.peer == nil || c.felix == nil {
				t.Errorf("%s %q: noTCP %q, peer %v", name, c.name, c.noTCP, c.peer != nil)
			}
			for _, m := range c.metrics {
				if m.felixKey == "" || m.peerKey == "" {
					t.Errorf("%s %q metric %q has no figure on a side", name, c.name, m.label)
				}
			}
		}
	}
	o, err = parseFlags([]string{"--workloads", "group,group-latency,durable-idempotent"})
	if err != nil || !slices.Equal(o.workloads, []string{"group", "group-latency", "durable-idempotent"}) {
		t.Errorf("--workloads: %v, %v", o, err)
	}
}

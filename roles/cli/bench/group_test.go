package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseConsumers(t *testing.T) {
	for in, want := range map[string][]int{"1": {1}, "3": {3}, "1..4": {1, 2, 3, 4}, " 2 .. 3 ": {2, 3}, "5..5": {5}} {
		got, err := parseConsumers(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseConsumers(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "4..1", "1..", "a..b", "1..65", "x"} {
		if got, err := parseConsumers(in); err == nil {
			t.Errorf("parseConsumers(%q) = %v, want an error", in, got)
		}
	}
}

func TestGroupParamsNameEveryBadValue(t *testing.T) {
	ok := groupParams{payload: 4096, max: 100, records: 10, rate: 100}
	p, err := groupParamsFrom(groupThroughput, "1..4", false, ok)
	if err != nil || !slices.Equal(p.steps, []int{1, 2, 3, 4}) || p.mode != groupThroughput {
		t.Fatalf("throughput defaults: %+v, %v", p, err)
	}
	// Latency takes one consumer unless told otherwise, and one count only.
	if p, err := groupParamsFrom(groupLatency, "1..4", false, ok); err != nil || !slices.Equal(p.steps, []int{1}) {
		t.Fatalf("latency default consumers: %+v, %v", p, err)
	}
	if _, err := groupParamsFrom(groupLatency, "1..4", true, ok); err == nil || !strings.Contains(err.Error(), "one count") {
		t.Fatalf("a latency range: %v", err)
	}
	bad := groupParams{payload: 4, max: 0, records: 0, rate: 0}
	_, err = groupParamsFrom(groupLatency, "0", true, bad)
	for _, flag := range []string{"--consumers", "--max", "--rate", "--payload"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("latency error %v does not name %s", err, flag)
		}
	}
	_, err = groupParamsFrom(groupThroughput, "2", true, groupParams{payload: 0, max: 1001, records: 0})
	for _, flag := range []string{"--max", "--records", "--payload"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("throughput error %v does not name %s", err, flag)
		}
	}
	if _, err := groupParamsFrom("sometimes", "1", true, ok); err == nil || !strings.Contains(err.Error(), "--mode") {
		t.Errorf("unknown mode: %v", err)
	}
}

func figureMap(r *result) map[string]float64 {
	m := map[string]float64{}
	for _, f := range r.Figures {
		m[f.Name] = f.Value
	}
	return m
}

func TestGroupThroughputResultReportsEachStepAndTheBest(t *testing.T) {
	p := groupParams{mode: groupThroughput, payload: 1000, max: 100, records: 4000, steps: []int{1, 2}, duration: 5 * time.Second}
	r := groupThroughputResult(p, []groupStep{
		{consumers: 1, acked: 4000, elapsed: 2 * time.Second, ackErrors: 1},
		{consumers: 2, acked: 4000, elapsed: time.Second, pollErrors: 2},
	})
	f := figureMap(r)
	for name, want := range map[string]float64{
		"acked_msgs_per_s_c1": 2000, "acked_msgs_per_s_c2": 4000, "acked_c1": 4000,
		"acked_msgs_per_s": 4000, "best_consumers": 2, "acked_mb_per_s": 4, "measured_s": 1,
		"poll_errors": 2, "ack_errors": 1,
	} {
		if got, ok := f[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if r.Scenario != "group" || r.Params["consumers"] != "1..2" || r.Params["mode"] != groupThroughput {
		t.Errorf("scenario %q params %v", r.Scenario, r.Params)
	}
	if f := figureMap(groupThroughputResult(p, nil)); len(f) != 0 {
		t.Errorf("no steps, figures %v", f)
	}
}

func TestGroupLatencyResultCountsLoss(t *testing.T) {
	lat := newLatencies(10)
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond} {
		lat.add(d)
	}
	p := groupParams{mode: groupLatency, payload: 64, max: 100, rate: 10, steps: []int{1}, duration: time.Second}
	f := figureMap(groupLatencyResult(p, groupLatencyMeasure{sent: 10, handled: 8, lagMax: time.Millisecond, lat: lat}))
	if f["lost"] != 2 || f["handled"] != 8 || f["publish_to_handler_p50"] != 2 || f["publish_to_handler_p99"] != 2 || f["publisher_lag_max"] != 1 {
		t.Errorf("figures %v", f)
	}
	// A redelivered record may be handled twice: never negative loss.
	if f := figureMap(groupLatencyResult(p, groupLatencyMeasure{sent: 1, handled: 2, lat: lat})); f["lost"] != 0 {
		t.Errorf("lost %v", f["lost"])
	}
}

package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func f(v float64) *float64 { return &v }

func TestSummarizeMedianAndRange(t *testing.T) {
	for _, tc := range []struct {
		in            []float64
		med, min, max float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
	} {
		s := summarize(tc.in)
		if s == nil || s.Median != tc.med || s.Min != tc.min || s.Max != tc.max || s.N != len(tc.in) {
			t.Errorf("summarize(%v) = %+v, want median %v range %v–%v", tc.in, s, tc.med, tc.min, tc.max)
		}
	}
	if summarize(nil) != nil {
		t.Error("summarize(nil) should be nil")
	}
}

func TestRatiosArePairedByRound(t *testing.T) {
	s := &Series{Peer: "p", Rounds: []Round{
		{Felix: f(10), Peer: f(20)}, // 0.5
		{Felix: f(30), Peer: f(10)}, // 3
		{Felix: f(5), PeerErr: "boom"},
		{Felix: f(8), Peer: f(0)}, // undefined: skipped
		{FelixErr: "x", Peer: f(7)},
		{Felix: f(9), Peer: f(9)}, // 1
	}}
	s.summarizeAll()
	// A ratio of medians would be median(10,30,5,8,9)=9 / median(20,10,0,7,9)=9 = 1;
	// the per-round ratios are 0.5, 3, 1.
	if s.Ratio == nil || s.Ratio.N != 3 || s.Ratio.Median != 1 || s.Ratio.Min != 0.5 || s.Ratio.Max != 3 {
		t.Fatalf("ratio summary = %+v", s.Ratio)
	}
	if s.Felix.N != 5 || s.PeerSum.N != 5 {
		t.Fatalf("felix %+v peer %+v", s.Felix, s.PeerSum)
	}
	if !s.complete() {
		t.Fatal("series with figures on both sides should be complete")
	}
}

func TestComplete(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Series
		want bool
	}{
		{"no rounds", Series{}, false},
		{"felix only, no peer", Series{Rounds: []Round{{Felix: f(1)}}}, true},
		{"peer missing", Series{Peer: "nats", Rounds: []Round{{Felix: f(1), PeerErr: "down"}}}, false},
		{"felix missing", Series{Peer: "nats", Rounds: []Round{{FelixErr: "down", Peer: f(1)}}}, false},
		{"pending", Series{Pending: "later"}, true},
	} {
		if got := tc.s.complete(); got != tc.want {
			t.Errorf("%s: complete = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPercentileNearestRank(t *testing.T) {
	v := make([]float64, 1000)
	for i := range v {
		v[i] = float64(i + 1) // 1..1000
	}
	for q, want := range map[float64]float64{0.5: 500, 0.99: 990, 0.999: 999, 1: 1000, 0: 1} {
		if got := percentile(v, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if !math.IsNaN(percentile(nil, 0.5)) {
		t.Error("percentile of nothing should be NaN")
	}
}

// A sender at a fixed rate that stalls must be charged for every message the
// stall delayed: latency runs from the intended send time, not the actual one.
func TestFixedRateLatencyCountsTheStall(t *testing.T) {
	start := time.Unix(1000, 0)
	sch := newSchedule(start, 1000) // one message per ms
	if n := sch.count(time.Second); n != 1000 {
		t.Fatalf("count = %d, want 1000", n)
	}
	rec := newRecorder(1 << 20)
	const service = 100 * time.Microsecond
	free := start // when the sender is next able to send
	for i := int64(0); i < 1000; i++ {
		due := sch.due(i)
		sendAt := due
		if free.After(sendAt) {
			sendAt = free
		}
		if i == 500 {
			sendAt = sendAt.Add(100 * time.Millisecond) // the sender stalls once
		}
		free = sendAt.Add(service)
		rec.add(free.Sub(due)) // delivered when sent plus service time
	}
	q := rec.quantilesMS(0.5, 0.9, 0.99)
	// Measured from the actual send time only one message (the stalled one)
	// would look slow; from the intended time ~100 of them were late by up
	// to 100 ms, so p90 stays small but p99 sees the backlog.
	if q[0] > 0.2 {
		t.Errorf("p50 = %v ms, want the service time", q[0])
	}
	if q[2] < 10 {
		t.Errorf("p99 = %v ms: the stall's backlog was not counted", q[2])
	}
}

func TestRecorderStaysBounded(t *testing.T) {
	rec := newRecorder(100)
	for i := range 10000 {
		rec.add(time.Duration(i) * time.Microsecond)
	}
	if n := len(rec.samples); n > 100 {
		t.Fatalf("kept %d samples, bound is 100", n)
	}
	q := rec.quantilesMS(0.5)
	if q[0] < 4 || q[0] > 6 { // the middle of 0..10 ms
		t.Fatalf("p50 = %v ms after thinning, want about 5", q[0])
	}
}

func TestSearchMaxRate(t *testing.T) {
	var tried []int
	got := searchMaxRate(100, 1<<20, 20, func(rate int) bool {
		tried = append(tried, rate)
		return rate <= 1234
	})
	if got > 1234 || got < 1234*95/100 {
		t.Fatalf("max rate = %d, want within 5%% below 1234 (tried %v)", got, tried)
	}
	if got := searchMaxRate(100, 1000, 20, func(int) bool { return true }); got != 800 {
		t.Fatalf("capped search = %d, want 800 (the last doubling under the cap)", got)
	}
	if got := searchMaxRate(100, 1000, 20, func(int) bool { return false }); got != 0 {
		t.Fatalf("nothing good should give 0, got %d", got)
	}
}

func TestParseBenchJSON(t *testing.T) {
	out := "noise\n" + `{"scenario":"pubsub","params":{},"figures":[{"name":"delivered_mb_per_s","value":12.5,"unit":"MB/s"}]}` + "\n"
	fig, err := parseBenchJSON([]byte(out))
	if err != nil || fig["delivered_mb_per_s"] != 12.5 {
		t.Fatalf("parse = %v, %v", fig, err)
	}
	if _, err := parseBenchJSON([]byte("panic: oops")); err == nil || !strings.Contains(err.Error(), "no JSON") {
		t.Fatalf("want a no-JSON error, got %v", err)
	}
}

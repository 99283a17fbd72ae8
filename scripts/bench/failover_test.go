package main

import (
	"slices"
	"testing"
	"time"
)

func TestSentTimeRoundTrips(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	got, ok := decodeSent(encodeSent(at, 42))
	if !ok || !got.Equal(at) {
		t.Fatalf("decodeSent = %v, %v; want %v", got, ok, at)
	}
	if _, ok := decodeSent([]byte("short")); ok {
		t.Error("a payload of the wrong size decoded")
	}
}

// Only a publish sent after the kill counts, for its acknowledgement and
// its delivery, and only the first one.
func TestKillWatchCountsOnlyWhatWasSentAfterTheKill(t *testing.T) {
	var w killWatch
	t0 := time.Unix(1000, 0)
	w.ack(t0, t0.Add(time.Millisecond)) // before any kill
	w.kill(t0.Add(time.Second))
	w.ack(t0.Add(500*time.Millisecond), t0.Add(2*time.Second)) // sent before the kill
	w.deliver(t0.Add(500*time.Millisecond), t0.Add(2*time.Second))
	if s := w.snapshot(); !s.acked.IsZero() || !s.delivered.IsZero() {
		t.Fatalf("a publish sent before the kill counted: %+v", s)
	}
	w.ack(t0.Add(3*time.Second), t0.Add(4*time.Second))
	w.ack(t0.Add(5*time.Second), t0.Add(6*time.Second))
	w.deliver(t0.Add(3*time.Second), t0.Add(5*time.Second))
	w.deliver(t0.Add(5*time.Second), t0.Add(7*time.Second))
	s := w.snapshot()
	if !s.acked.Equal(t0.Add(4*time.Second)) || !s.delivered.Equal(t0.Add(5*time.Second)) {
		t.Errorf("acked %v, delivered %v; want the first after the kill", s.acked, s.delivered)
	}
	if s.acks != 4 || s.events != 3 {
		t.Errorf("%d acks, %d events; want 4 and 3", s.acks, s.events)
	}
}

// A failed kill counts at the give-up bound, so it shows in p99 and max.
func TestSummarizeKillsCountsAFailedKillAtTheBound(t *testing.T) {
	var rs []killResult
	for i := range 19 {
		d := time.Duration(5000+i*10) * time.Millisecond
		rs = append(rs, killResult{acked: d, delivered: d + time.Second, ackedOK: true, deliveredOK: true, raftLeader: i%3 == 0})
	}
	rs = append(rs, killResult{acked: 7 * time.Second, ackedOK: true}) // no delivery
	f := summarizeKills(rs)
	want := figures{"kills": 20, "failed": 1, "raft_leader_kills": 7,
		"acked_p50": 5.09, "acked_p99": 7, "acked_max": 7,
		"delivered_p50": 6.09, "delivered_p99": failoverGiveUp.Seconds(), "delivered_max": failoverGiveUp.Seconds()}
	for k, v := range want {
		if got, ok := f[k]; !ok || got < v-1e-9 || got > v+1e-9 {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
}

func TestFailoverRunsOnlyWhenNamedWithoutWarmUp(t *testing.T) {
	var w *workload
	for _, x := range allWorkloads() {
		if x.name == "failover" {
			w = &x
		}
	}
	if w == nil || w.onlyNamed == "" || w.noWarmup == "" {
		t.Fatalf("failover workload %+v: want one that runs only when named, without a warm-up", w)
	}
	for _, args := range [][]string{nil, {"--smoke"}, {"--workloads", "all"}} {
		o, err := parseFlags(args)
		if err != nil || slices.Contains(o.workloads, "failover") {
			t.Errorf("%v runs failover (%v)", args, err)
		}
	}
	t.Setenv("BENCH_FAILOVER_KILLS", "")
	o, err := parseFlags([]string{"--workloads", "failover", "--rounds", "1"})
	if err != nil || !slices.Equal(o.workloads, []string{"failover"}) || o.failoverKills != failoverKillsDefault {
		t.Fatalf("--workloads failover: %+v, %v", o, err)
	}
	t.Setenv("BENCH_FAILOVER_KILLS", "3")
	if o, err = parseFlags([]string{"--workloads", "failover"}); err != nil || o.failoverKills != 3 {
		t.Errorf("BENCH_FAILOVER_KILLS=3: %d kills, %v", o.failoverKills, err)
	}
	if o, err = parseFlags([]string{"--workloads", "failover", "--failover-kills", "5"}); err != nil || o.failoverKills != 5 {
		t.Errorf("--failover-kills 5 with BENCH_FAILOVER_KILLS=3: %d kills, %v", o.failoverKills, err)
	}
	if _, err = parseFlags([]string{"--failover-kills", "0"}); err == nil {
		t.Error("--failover-kills 0 accepted")
	}
	cs := w.cases(o)
	if len(cs) != 1 || cs[0].peer != nil || cs[0].noTCP != "" {
		t.Errorf("cases %+v: want one Felix-only case over both transports", cs)
	}
}

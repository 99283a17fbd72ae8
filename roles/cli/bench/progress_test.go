package bench

import (
	"bytes"
	"os"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	p := newProgress(&bytes.Buffer{}, 10*time.Second)
	p.counter("published").Add(1200)
	p.counter("delivered").Add(1100)
	if got, want := p.line(3250*time.Millisecond), "3.2s / 10s  published 1200  delivered 1100"; got != want {
		t.Fatalf("line = %q, want %q", got, want)
	}
	p.total = 0
	if got, want := p.line(time.Second), "1s  published 1200  delivered 1100"; got != want {
		t.Fatalf("line without a planned length = %q, want %q", got, want)
	}
}

// TestProgressSilentWhenPiped: a writer that is not a terminal gets
// nothing, and run/stop still pair up.
func TestProgressSilentWhenPiped(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, time.Second)
	p.run()
	p.counter("published").Add(1)
	p.stop()
	if buf.Len() != 0 {
		t.Fatalf("drew %q on a pipe", buf.String())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) {
		t.Fatal("a pipe is not a terminal")
	}
	var nilProgress *progress
	nilProgress.counter("x").Add(1) // a scenario run without progress
}

// TestPubSubFiguresAgree: every rate is its count over the one measured
// interval, so the summary's figures agree with each other.
func TestPubSubFiguresAgree(t *testing.T) {
	start := time.Unix(1000, 0)
	m := pubsubMeasure{start: start, pubEnd: start.Add(2 * time.Second), lastDelivery: start.Add(2500 * time.Millisecond),
		published: 100000, delivered: 90000, deliveredBytes: 90000 * 100, payload: 100}
	r := &result{}
	m.addTo(r)
	fig := map[string]float64{}
	for _, f := range r.Figures {
		fig[f.Name] = f.Value
	}
	if fig["measured_s"] != 2.5 {
		t.Fatalf("measured over %v s, want 2.5 (to the last delivery)", fig["measured_s"])
	}
	for _, c := range []struct{ rate, count string }{
		{"published_msgs_per_s", "published"}, {"delivered_msgs_per_s", "delivered"},
	} {
		if got, want := fig[c.rate], fig[c.count]/fig["measured_s"]; got != want {
			t.Errorf("%s = %v, want %s / measured_s = %v", c.rate, got, c.count, want)
		}
	}
	if fig["lost"] != 10000 || fig["delivered_mb_per_s"] != 3.6 || fig["published_mb_per_s"] != 4 {
		t.Errorf("figures %v", fig)
	}
	// Delivery done before the publisher finished: the publisher's end bounds it.
	m.lastDelivery = start.Add(time.Second)
	if got := m.interval(); got != 2*time.Second {
		t.Errorf("interval %v, want 2s", got)
	}
}

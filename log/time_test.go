package log

import "testing"

func TestOffsetForTime(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 5 * recSize
	o.IndexIntervalBytes = 1
	l := mustOpen(t, o)
	// Times by offset; 7 goes backwards (a replicated record, say).
	times := []uint64{100, 200, 200, 300, 400, 500, 600, 550, 700, 800, 900, 1000}
	for i, tm := range times {
		if _, err := l.AppendAt([][]byte{payload(i, 100)}, "pub", tm); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		t    uint64
		want uint64
		ok   bool
	}{
		{0, 0, true}, {100, 0, true}, {150, 1, true}, {200, 1, true}, {201, 3, true},
		{550, 6, true}, {600, 6, true}, {601, 8, true}, {1000, 11, true}, {1001, 0, false},
	}
	for _, c := range cases {
		got, ok, err := l.OffsetForTime(c.t)
		if err != nil || ok != c.ok || (ok && got != c.want) {
			t.Errorf("OffsetForTime(%d) = %d, %v, %v; want %d, %v", c.t, got, ok, err, c.want, c.ok)
		}
	}
	// Check against a linear scan for every time.
	for q := uint64(0); q <= 1010; q += 10 {
		want, wantOK := uint64(0), false
		for i, tm := range times {
			if tm >= q {
				want, wantOK = uint64(i), true
				break
			}
		}
		got, ok, _ := l.OffsetForTime(q)
		if ok != wantOK || got != want {
			t.Fatalf("OffsetForTime(%d) = %d %v, scan says %d %v", q, got, ok, want, wantOK)
		}
	}
	l2 := mustOpen(t, testOptions(t))
	if _, ok, err := l2.OffsetForTime(0); ok || err != nil {
		t.Fatal("empty log found a time")
	}
}

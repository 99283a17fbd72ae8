package mux

import "testing"

func TestDataPoolClasses(t *testing.T) {
	for _, tc := range []struct{ n, cap int }{
		{0, 512}, {1, 512}, {512, 512}, {513, 1024}, {4096, 4096}, {4097, 8192}, {maxDataPayload, maxDataPayload}, {maxDataPayload + 1, maxDataPayload + 1},
	} {
		b := getData(tc.n)
		if len(b) != tc.n || cap(b) != tc.cap {
			t.Errorf("getData(%d): len %d cap %d, want cap %d", tc.n, len(b), cap(b), tc.cap)
		}
		putData(b)
		again := getData(tc.n)
		if len(again) != tc.n || cap(again) < tc.n {
			t.Errorf("getData(%d) after a put: len %d cap %d", tc.n, len(again), cap(again))
		}
	}
	// A buffer of no class is left to the collector, never handed out short.
	putData(make([]byte, 0, 1000))
	if b := getData(1000); cap(b) != 1024 {
		t.Errorf("a foreign buffer came back: cap %d", cap(b))
	}
}

package gogroup

import (
	"sync/atomic"
	"testing"
)

func TestCloseWaitsAndRefusesLaterGoroutines(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var ran atomic.Int32
	for range 3 {
		if !g.Go(func() { <-release; ran.Add(1) }) {
			t.Fatal("refused before Close")
		}
	}
	closed := make(chan struct{})
	go func() {
		g.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while goroutines ran")
	default:
	}
	close(release)
	<-closed
	if ran.Load() != 3 {
		t.Fatalf("%d ran", ran.Load())
	}
	if g.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("accepted after Close")
	}
	g.Close() // again: no wait, no panic
}

// TestGoRacingClose starts goroutines while Close runs: each is either
// refused or waited for (the race detector checks the WaitGroup use).
func TestGoRacingClose(t *testing.T) {
	for range 100 {
		var g Group
		var started, finished atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 50 {
				if g.Go(func() { finished.Add(1) }) {
					started.Add(1)
				}
			}
		}()
		g.Close()
		<-done
		g.Close()
		if started.Load() != finished.Load() {
			t.Fatalf("started %d, finished %d after Close", started.Load(), finished.Load())
		}
	}
}

package felix

import (
	"sync"
	"testing"
)

func TestItemQueueKeepsOrderAndItsBound(t *testing.T) {
	q := newItemQueue[int](3)
	for i := range 3 {
		if !q.tryPush(i) {
			t.Fatalf("push %d refused below the bound", i)
		}
	}
	if q.tryPush(3) {
		t.Fatal("a full queue took a fourth item")
	}
	for want := range 3 {
		got, ok := q.tryPop()
		if !ok || got != want {
			t.Fatalf("pop = %d, %v; want %d", got, ok, want)
		}
	}
	if _, ok := q.tryPop(); ok {
		t.Fatal("an empty queue gave an item")
	}
}

func TestItemQueueLetsGoOfABurst(t *testing.T) {
	q := newItemQueue[int](1 << 20)
	for i := range 10_000 {
		q.tryPush(i)
	}
	for range 10_000 {
		q.tryPop()
	}
	if c := cap(q.items); c > keptCap {
		t.Fatalf("an emptied queue keeps storage for %d items", c)
	}
}

// A reader that waits for room and callers of next racing each other get
// every item once, in order per producer.
func TestItemQueueUnderConcurrentUse(t *testing.T) {
	const n = 20_000
	q := newItemQueue[int](7)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			for !q.tryPush(i) {
				<-q.roomC
			}
		}
	}()
	var mu sync.Mutex
	seen := make([]bool, n)
	last := make([]int, 3)
	var wg sync.WaitGroup
	var total sync.WaitGroup
	total.Add(n)
	stop := make(chan struct{})
	for c := range 3 {
		last[c] = -1
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if it, ok := q.tryPop(); ok {
					mu.Lock()
					if seen[it] || it <= last[c] {
						mu.Unlock()
						t.Errorf("item %d twice or out of order (after %d)", it, last[c])
						total.Done()
						continue
					}
					seen[it], last[c] = true, it
					mu.Unlock()
					total.Done()
					continue
				}
				select {
				case <-q.readyC:
				case <-stop:
					return
				}
			}
		}()
	}
	total.Wait()
	close(stop)
	wg.Wait()
	<-done
}

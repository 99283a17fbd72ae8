package sched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/felixmq/felix/core"
)

func laneOf(stream string, shard uint32) LaneKey {
	return LaneKey{Stream: core.StreamKey{Tenant: "t", Namespace: "ns", Stream: stream}, Shard: shard}
}

func TestLaneFIFOAcrossExecutors(t *testing.T) {
	const lanes, perLane = 16, 200
	s := New(Config{Executors: 8, QueueDepth: 64, MaxQueued: 256, Quantum: 1000})
	var mu sync.Mutex
	seen := make([][]int, lanes)
	ctx := context.Background()
	for i := range perLane {
		for l := range lanes {
			job := Job{Tenant: fmt.Sprint("tenant", l%3), Lane: laneOf("s", uint32(l)), Bytes: 10 * (l + 1), Run: func() {
				mu.Lock()
				seen[l] = append(seen[l], i)
				mu.Unlock()
			}}
			if err := s.Enqueue(ctx, job); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	for l, got := range seen {
		if len(got) != perLane {
			t.Fatalf("lane %d ran %d jobs, want %d", l, len(got), perLane)
		}
		for i, v := range got {
			if v != i {
				t.Fatalf("lane %d: position %d ran job %d", l, i, v)
			}
		}
	}
}

func TestLanesRunInParallelButEachSerially(t *testing.T) {
	s := New(Config{Executors: 4})
	defer s.Close()
	var active [2]atomic.Int32
	var overlap atomic.Bool
	started := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	run := func(l int) func() {
		return func() {
			if active[l].Add(1) != 1 {
				overlap.Store(true)
			}
			once[l].Do(func() { close(started[l]) })
			// The first job of each lane waits until the other lane has
			// started one: only possible if the two lanes run at once.
			select {
			case <-started[1-l]:
			case <-time.After(10 * time.Second):
				t.Errorf("lane %d: the other lane never ran alongside", l)
			}
			active[l].Add(-1)
		}
	}
	for range 50 {
		for l := range 2 {
			if err := s.Enqueue(context.Background(), Job{Tenant: "a", Lane: laneOf("s", uint32(l)), Bytes: 1, Run: run(l)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	if overlap.Load() {
		t.Fatal("a lane ran two jobs at once")
	}
}

// runOrder queues jobs on a scheduler with one executor before it
// starts, runs them all and returns the tenants in execution order.
func runOrder(t *testing.T, cfg Config, jobs []Job) []string {
	t.Helper()
	cfg.Executors = 1
	s := newScheduler(cfg)
	var order []string // written only by the single executor
	for _, j := range jobs {
		tenant := j.Tenant
		j.Run = func() { order = append(order, tenant) }
		if err := s.TryEnqueue(j); err != nil {
			t.Fatal(err)
		}
	}
	s.start()
	s.Close()
	return order
}

func TestDRRLetsSmallTenantThroughAFlood(t *testing.T) {
	var jobs []Job
	for i := range 60 { // tenant A floods big jobs over several lanes
		jobs = append(jobs, Job{Tenant: "A", Lane: laneOf("a", uint32(i%5)), Bytes: 4000})
	}
	for range 20 { // tenant B arrives later with small jobs on one lane
		jobs = append(jobs, Job{Tenant: "B", Lane: laneOf("b", 0), Bytes: 100})
	}
	order := runOrder(t, Config{QueueDepth: 100, MaxQueued: 1000, Quantum: 1000}, jobs)
	if len(order) != 80 {
		t.Fatalf("ran %d jobs", len(order))
	}
	// Count A's jobs before B's first and between B's consecutive jobs.
	aRun, bSeen := 0, 0
	for _, who := range order {
		if who == "A" {
			aRun++
			continue
		}
		if aRun > 1 {
			t.Fatalf("%d A jobs ran before B job %d (order %v)", aRun, bSeen, order)
		}
		aRun = 0
		bSeen++
	}
}

func TestDRRSharesBytesEvenly(t *testing.T) {
	// Equal byte demand per round: A sends one 1000-byte job per turn, B
	// ten 100-byte jobs. Each gets one quantum's worth per round.
	var jobs []Job
	for i := range 10 {
		jobs = append(jobs, Job{Tenant: "A", Lane: laneOf("a", uint32(i)), Bytes: 1000})
	}
	for i := range 100 {
		jobs = append(jobs, Job{Tenant: "B", Lane: laneOf("b", uint32(i%10)), Bytes: 100})
	}
	order := runOrder(t, Config{QueueDepth: 200, MaxQueued: 1000, Quantum: 1000}, jobs)
	for round := range 10 {
		chunk := order[round*11 : round*11+11]
		a := 0
		for _, who := range chunk {
			if who == "A" {
				a++
			}
		}
		if a != 1 {
			t.Fatalf("round %d ran %d A jobs: %v", round, a, chunk)
		}
	}
}

func TestPerTenantSlotsRefuseTheFlooder(t *testing.T) {
	// QueueDepth 4, MaxQueued 16: shared remainder 8.
	s := newScheduler(Config{Executors: 2, QueueDepth: 4, MaxQueued: 16})
	job := func(tenant string) Job { return Job{Tenant: tenant, Lane: laneOf(tenant, 0), Bytes: 1, Run: func() {}} }
	accepted := 0
	for s.TryEnqueue(job("A")) == nil {
		accepted++
	}
	if accepted != 12 {
		t.Fatalf("flooding tenant got %d slots, want 4 own + 8 shared", accepted)
	}
	if err := s.TryEnqueue(job("A")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("flooder: %v, want ErrQueueFull", err)
	}
	for i := range 4 {
		if err := s.TryEnqueue(job("B")); err != nil {
			t.Fatalf("B job %d refused while A floods: %v", i, err)
		}
	}
	if err := s.TryEnqueue(job("B")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("B beyond its slots with the shared remainder gone: %v", err)
	}
	if err := s.TryEnqueue(job("C")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("C with the total bound reached: %v", err)
	}
	if d := s.Depth(); d != 16 {
		t.Fatalf("Depth = %d, want 16", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := s.Enqueue(ctx, job("A"))
	if !errors.Is(err, ErrQueueFull) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enqueue with a full queue and an ending context: %v", err)
	}

	// A waiting Enqueue gets in once executors drain the queue.
	done := make(chan error, 1)
	go func() { done <- s.Enqueue(context.Background(), job("A")) }()
	s.start()
	if err := <-done; err != nil {
		t.Fatalf("waiting Enqueue: %v", err)
	}
	s.Close()
	if d := s.Depth(); d != 0 {
		t.Fatalf("Depth after Close = %d", d)
	}
}

func TestCloseRunsQueuedJobsAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Executors: 3, QueueDepth: 100, MaxQueued: 100})
		gate := make(chan struct{})
		var ran atomic.Int32
		for i := range 60 {
			j := Job{Tenant: fmt.Sprint(i % 4), Lane: laneOf("s", uint32(i%5)), Bytes: i, Run: func() {
				<-gate
				ran.Add(1)
			}}
			if err := s.TryEnqueue(j); err != nil {
				t.Fatal(err)
			}
		}
		// An Enqueue waiting for room when Close starts is refused.
		full := newScheduler(Config{Executors: 1, QueueDepth: 1, MaxQueued: 1})
		if err := full.TryEnqueue(Job{Tenant: "x", Lane: laneOf("x", 0), Run: func() {}}); err != nil {
			t.Fatal(err)
		}
		waiting := make(chan error, 1)
		go func() {
			waiting <- full.Enqueue(context.Background(), Job{Tenant: "x", Lane: laneOf("x", 0), Run: func() {}})
		}()
		synctest.Wait()
		full.start()
		full.Close()
		if err := <-waiting; err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("waiting Enqueue at Close: %v", err)
		}

		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		synctest.Wait()
		if err := s.TryEnqueue(Job{Tenant: "a", Lane: laneOf("s", 0), Run: func() {}}); !errors.Is(err, ErrClosed) {
			t.Fatalf("TryEnqueue while closing: %v", err)
		}
		close(gate)
		<-closed
		if n := ran.Load(); n != 60 {
			t.Fatalf("Close ran %d of 60 queued jobs", n)
		}
		if err := s.Enqueue(context.Background(), Job{Tenant: "a", Lane: laneOf("s", 0), Run: func() {}}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Enqueue after Close: %v", err)
		}
		s.Close() // idempotent
		// synctest.Test fails if any executor goroutine is still alive.
	})
}

func TestRejectsJobWithoutRun(t *testing.T) {
	s := New(Config{Executors: 1})
	defer s.Close()
	if err := s.TryEnqueue(Job{Tenant: "a", Lane: laneOf("s", 0)}); !errors.Is(err, ErrNoRun) {
		t.Fatalf("nil Run: %v", err)
	}
}

func TestHugeJobDoesNotSpin(t *testing.T) {
	// A job far larger than the quantum is reached by fast-forwarding
	// whole rounds rather than stepping them one by one.
	order := runOrder(t, Config{Quantum: 1}, []Job{
		{Tenant: "A", Lane: laneOf("a", 0), Bytes: 1 << 40},
		{Tenant: "B", Lane: laneOf("b", 0), Bytes: 1 << 41},
	})
	if fmt.Sprint(order) != "[A B]" {
		t.Fatalf("order %v", order)
	}
}

func TestForwardedLaneIsApartFromTheShardsOwn(t *testing.T) {
	s := New(Config{Executors: 2})
	defer s.Close()
	own := laneOf("s", 0)
	fwd := own
	fwd.Forwarded = true
	if own == fwd || fwd.String() != own.String()+"(forwarded)" {
		t.Fatalf("lanes %v and %v", own, fwd)
	}
	// Each job waits for the other: they finish only if the two lanes run
	// side by side.
	a, b := make(chan struct{}), make(chan struct{})
	done := make(chan struct{}, 2)
	wait := func(mine, other chan struct{}) func() {
		return func() {
			close(mine)
			select {
			case <-other:
			case <-time.After(10 * time.Second):
				t.Error("the other lane never ran alongside")
			}
			done <- struct{}{}
		}
	}
	for _, j := range []Job{{Tenant: "a", Lane: own, Run: wait(a, b)}, {Tenant: "a", Lane: fwd, Run: wait(b, a)}} {
		if err := s.TryEnqueue(j); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	<-done
}

func TestRunNowRunsOnTheCallerWhenIdle(t *testing.T) {
	s := New(Config{Executors: 1})
	defer s.Close()
	ran := false
	if !s.RunNow(Job{Tenant: "a", Lane: laneOf("s", 0), Bytes: 1, Run: func() { ran = true }}) || !ran {
		t.Fatal("an idle scheduler did not run the job on the caller")
	}
	if s.RunNow(Job{Tenant: "a", Lane: laneOf("s", 0)}) {
		t.Fatal("a job without Run ran")
	}
}

func TestRunNowDefers(t *testing.T) {
	s := New(Config{Executors: 1})
	release := make(chan struct{})
	started := make(chan struct{})
	block := func() { close(started); <-release }
	if err := s.TryEnqueue(Job{Tenant: "a", Lane: laneOf("s", 0), Bytes: 1, Run: block}); err != nil {
		t.Fatal(err)
	}
	<-started
	ran := func() {}
	// The lane runs a job: later ones queue behind it.
	if s.RunNow(Job{Tenant: "a", Lane: laneOf("s", 0), Bytes: 1, Run: ran}) {
		t.Fatal("ran beside a running job of its lane")
	}
	// Every executor is busy (one here): another lane waits too.
	if s.RunNow(Job{Tenant: "a", Lane: laneOf("s", 1), Bytes: 1, Run: ran}) {
		t.Fatal("ran with every executor busy")
	}
	close(release)
	s.Close()
	if s.RunNow(Job{Tenant: "a", Lane: laneOf("s", 1), Bytes: 1, Run: ran}) {
		t.Fatal("ran after Close")
	}
}

func TestRunNowYieldsToQueuedJobs(t *testing.T) {
	s := newScheduler(Config{Executors: 2})
	var order []string
	var mu sync.Mutex
	note := func(name string) func() {
		return func() { mu.Lock(); order = append(order, name); mu.Unlock() }
	}
	if err := s.TryEnqueue(Job{Tenant: "b", Lane: laneOf("s", 1), Bytes: 1, Run: note("queued")}); err != nil {
		t.Fatal(err)
	}
	// A job waits (executors not started): running another now would
	// take its turn.
	if s.RunNow(Job{Tenant: "a", Lane: laneOf("s", 2), Bytes: 1, Run: note("now")}) {
		t.Fatal("ran ahead of a queued job")
	}
	s.start()
	s.Close()
	if len(order) != 1 || order[0] != "queued" {
		t.Fatalf("ran %v", order)
	}
}

// A job queued on a lane while RunNow runs that lane's job starts once it
// has finished, in order, and Close waits for the job run on the caller.
func TestRunNowKeepsLaneOrderAndCloseWaits(t *testing.T) {
	s := New(Config{Executors: 2})
	var mu sync.Mutex
	var order []int
	inNow := make(chan struct{})
	release := make(chan struct{})
	done := make(chan bool)
	go func() {
		done <- s.RunNow(Job{Tenant: "a", Lane: laneOf("s", 0), Bytes: 1, Run: func() {
			close(inNow)
			<-release
			mu.Lock()
			order = append(order, 1)
			mu.Unlock()
		}})
	}()
	<-inNow
	if err := s.TryEnqueue(Job{Tenant: "a", Lane: laneOf("s", 0), Bytes: 1, Run: func() {
		mu.Lock()
		order = append(order, 2)
		mu.Unlock()
	}}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a job ran on the caller")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if !<-done {
		t.Fatal("RunNow on an idle lane did not run")
	}
	<-closed
	if len(order) != 2 || order[0] != 1 || order[1] != 2 {
		t.Fatalf("lane order %v", order)
	}
}

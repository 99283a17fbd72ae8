package sched

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// Config sizes a Scheduler. Zero or negative fields take their defaults.
type Config struct {
	// Executors is the number of executor goroutines (default
	// 2*GOMAXPROCS).
	Executors int
	// QueueDepth is each tenant's guaranteed queued jobs (default 512).
	QueueDepth int
	// MaxQueued bounds the queued jobs of all tenants together (default
	// 8192). Half of it is the shared remainder tenants may borrow beyond
	// QueueDepth.
	MaxQueued int
	// Quantum is the credit in bytes a tenant gains per turn (default
	// 64 KiB).
	Quantum int
}

// withDefaults returns c with every unset field filled in.
func (c Config) withDefaults() Config {
	if c.Executors <= 0 {
		c.Executors = 2 * runtime.GOMAXPROCS(0)
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = 512
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = 8192
	}
	if c.Quantum <= 0 {
		c.Quantum = 64 << 10
	}
	return c
}

// Scheduler runs Jobs on a fixed set of executors, one job at a time per
// lane and fairly across tenants. See the package documentation.
type Scheduler struct {
	cfg Config
	wg  sync.WaitGroup // executors

	mu sync.Mutex // guards the fields below
	q  *fairQueue
	// work wakes executors when a job may have become runnable or the
	// scheduler is closing.
	work *sync.Cond
	// roomC is closed (and reset to nil) when a queued job leaves the
	// queue; nil while no Enqueue waits.
	roomC  chan struct{}
	closed bool
	// running counts the jobs running now, on executors or through
	// RunNow; RunNow keeps it at most cfg.Executors.
	running int
}

// New starts a scheduler with cfg's executors.
func New(cfg Config) *Scheduler {
	s := newScheduler(cfg)
	s.start()
	return s
}

// newScheduler builds a scheduler whose executors are not started yet, so
// tests can queue jobs before anything runs.
func newScheduler(cfg Config) *Scheduler {
	cfg = cfg.withDefaults()
	s := &Scheduler{cfg: cfg, q: newFairQueue(cfg.Quantum, cfg.QueueDepth, cfg.MaxQueued)}
	s.work = sync.NewCond(&s.mu)
	return s
}

func (s *Scheduler) start() {
	for range s.cfg.Executors {
		s.wg.Go(s.execute)
	}
}

// TryEnqueue queues j without blocking. It returns ErrQueueFull when j's
// tenant has no slot left, ErrClosed after Close, ErrNoRun for a job
// without Run.
func (s *Scheduler) TryEnqueue(j Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushLocked(j)
}

// Enqueue queues j, waiting for room while the queue is full. When ctx
// ends first it returns an error that matches both ErrQueueFull and the
// context's error under errors.Is.
func (s *Scheduler) Enqueue(ctx context.Context, j Job) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for {
		s.mu.Lock()
		err := s.pushLocked(j)
		if err != ErrQueueFull {
			s.mu.Unlock()
			return err
		}
		if s.roomC == nil {
			s.roomC = make(chan struct{})
		}
		roomC := s.roomC
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrQueueFull, ctx.Err())
		case <-roomC:
		}
	}
}

// RunNow runs j on the calling goroutine, as an executor would, when
// doing so takes no one's turn: the scheduler is open, no job is queued
// anywhere, nothing runs on j's lane, and fewer jobs run than there are
// executors. It reports whether j ran; when it did not, nothing happened
// and the caller queues j as usual. It spares an idle scheduler the
// hand-off to an executor, which on a busy machine costs more than a
// short job does. Run must not call Close.
func (s *Scheduler) RunNow(j Job) bool {
	if j.Run == nil {
		return false
	}
	s.mu.Lock()
	if s.closed || s.q.total > 0 || s.running >= s.cfg.Executors || !s.q.claimIdle(j.Lane) {
		s.mu.Unlock()
		return false
	}
	s.running++
	s.wg.Add(1) // Close waits for it like an executor's job
	s.mu.Unlock()
	defer s.wg.Done()
	j.Run()
	s.mu.Lock()
	s.finishLocked(j.Lane)
	if s.q.readyTenants > 0 {
		s.work.Signal() // a job queued behind j's may run now
	}
	s.mu.Unlock()
	return true
}

// finishLocked marks a running job of lane k done.
func (s *Scheduler) finishLocked(k LaneKey) {
	s.q.finish(k)
	s.running--
	if s.closed {
		s.work.Broadcast() // the last job may have finished
	}
}

func (s *Scheduler) pushLocked(j Job) error {
	if s.closed {
		return ErrClosed
	}
	if err := s.q.push(j); err != nil {
		return err
	}
	s.work.Signal()
	return nil
}

// Depth returns the number of queued jobs (running jobs excluded), for
// the felix_broker_ingress_queue_depth gauge.
func (s *Scheduler) Depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.total
}

// Close refuses new jobs, runs every job already queued, then stops the
// executors and waits for them. It is idempotent and must not be called
// from a Job's Run.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.work.Broadcast()
		s.wakeEnqueuersLocked()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// execute is one executor: it runs jobs until the scheduler is closed and
// its queue is empty.
func (s *Scheduler) execute() {
	s.mu.Lock()
	for {
		j, ok := s.q.next()
		if !ok {
			if s.closed && s.q.total == 0 {
				s.mu.Unlock()
				return
			}
			s.work.Wait()
			continue
		}
		if s.q.readyTenants > 0 {
			s.work.Signal() // more runnable work: pass it on to an idle executor
		}
		s.running++
		s.wakeEnqueuersLocked()
		s.mu.Unlock()
		j.Run()
		s.mu.Lock()
		s.finishLocked(j.Lane)
	}
}

// wakeEnqueuersLocked tells waiting Enqueue calls that room may exist.
func (s *Scheduler) wakeEnqueuersLocked() {
	if s.roomC != nil {
		close(s.roomC)
		s.roomC = nil
	}
}

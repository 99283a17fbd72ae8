package sched

import (
	"errors"
	"fmt"

	"github.com/felixmq/felix/core"
)

// LaneKey names a lane: one shard of one stream, or, with Forwarded, the
// publishes this broker forwards to that shard's owner on another broker
// (a lane apart, so forwards never queue behind or ahead of the shard's
// own publishes here).
type LaneKey struct {
	Stream    core.StreamKey
	Shard     uint32
	Forwarded bool
}

func (k LaneKey) String() string {
	s := fmt.Sprintf("%s/%s/%s#%d", k.Stream.Tenant, k.Stream.Namespace, k.Stream.Stream, k.Shard)
	if k.Forwarded {
		s += "(forwarded)"
	}
	return s
}

// Job is one unit of scheduled work: the ordered half of a publish.
type Job struct {
	// Tenant is charged for the job in the fair-share accounting.
	Tenant string
	// Lane serializes the job with every other job of the same lane.
	Lane LaneKey
	// Bytes is the job's weight for deficit round robin (payload bytes).
	Bytes int
	// Run does the work on an executor goroutine. It must not be nil.
	Run func()
}

// Errors returned by the scheduler.
var (
	// ErrQueueFull means the tenant has used its guaranteed slots and the
	// shared remainder (or the total bound) is exhausted.
	ErrQueueFull = errors.New("sched: publish queue full")
	// ErrClosed means the scheduler has been closed.
	ErrClosed = errors.New("sched: scheduler closed")
	// ErrNoRun means a job was submitted without a Run function.
	ErrNoRun = errors.New("sched: job has no Run function")
)

// cost is what a job takes from its tenant's deficit.
func cost(j *Job) int { return max(j.Bytes, 1) }

// lane is one lane's FIFO.
type lane struct {
	key LaneKey
	// jobs are the queued jobs, oldest first. Invariant: when !busy and
	// len(jobs) > 0 the lane is in the ready list of jobs[0].Tenant.
	jobs []Job
	// busy is true while an executor runs a job of this lane.
	busy bool
}

// tenant is one tenant's fair-share state. It exists only while the
// tenant has queued jobs.
type tenant struct {
	name string
	// queued counts the tenant's jobs waiting in lanes (not running).
	queued int
	// deficit is the credit in bytes left from earlier turns.
	deficit int
	// ready lists, oldest first, the lanes that are not busy and whose
	// head job is this tenant's.
	ready []*lane
	// prev and next link the ring of tenants with queued jobs.
	prev, next *tenant
}

// fairQueue is the scheduler's state machine: admission, lanes and
// deficit round robin. It does no locking and starts no goroutines.
type fairQueue struct {
	quantum   int // credit per turn, bytes
	depth     int // guaranteed queued jobs per tenant
	maxQueued int // bound on all queued jobs
	sharedCap int // bound on jobs queued beyond their tenant's depth

	lanes   map[LaneKey]*lane  // lanes with queued or running jobs
	tenants map[string]*tenant // tenants with queued jobs

	// cursor is the tenant whose turn it is; nil when the ring is empty.
	cursor *tenant
	// inTurn is true when cursor already got its credit for this turn.
	inTurn       bool
	ringLen      int
	readyTenants int // tenants with a non-empty ready list

	total    int // queued jobs. Invariant: total <= maxQueued
	overflow int // sum over tenants of max(queued-depth, 0)
}

func newFairQueue(quantum, depth, maxQueued int) *fairQueue {
	return &fairQueue{
		quantum: quantum, depth: depth, maxQueued: maxQueued, sharedCap: maxQueued / 2,
		lanes: map[LaneKey]*lane{}, tenants: map[string]*tenant{},
	}
}

// admit reports whether tenant name may queue one more job.
func (q *fairQueue) admit(name string) error {
	if q.total >= q.maxQueued {
		return ErrQueueFull
	}
	var queued int
	if t := q.tenants[name]; t != nil {
		queued = t.queued
	}
	if queued >= q.depth && q.overflow >= q.sharedCap {
		return ErrQueueFull
	}
	return nil
}

// push queues j at the tail of its lane.
func (q *fairQueue) push(j Job) error {
	if j.Run == nil {
		return ErrNoRun
	}
	if err := q.admit(j.Tenant); err != nil {
		return err
	}
	t := q.tenants[j.Tenant]
	if t == nil {
		t = &tenant{name: j.Tenant}
		q.tenants[j.Tenant] = t
		q.ringInsert(t)
	}
	if t.queued >= q.depth {
		q.overflow++
	}
	t.queued++
	q.total++
	l := q.lanes[j.Lane]
	if l == nil {
		l = &lane{key: j.Lane}
		q.lanes[j.Lane] = l
	}
	l.jobs = append(l.jobs, j)
	if !l.busy && len(l.jobs) == 1 {
		q.makeReady(l)
	}
	return nil
}

// next picks the job to run now by deficit round robin and marks its lane
// busy. ok is false when no lane is runnable. The caller must call finish
// with the job's lane when the job has run.
func (q *fairQueue) next() (j Job, ok bool) {
	if q.readyTenants == 0 {
		return Job{}, false
	}
	endedTurns := 0
	for {
		t := q.cursor
		if !q.inTurn && len(t.ready) > 0 {
			t.deficit += q.quantum
			q.inTurn = true
		}
		if q.inTurn && len(t.ready) > 0 {
			if l := t.ready[0]; cost(&l.jobs[0]) <= t.deficit {
				return q.dispatch(t, l), true
			}
		} else {
			t.deficit = 0 // nothing runnable: leftover credit lapses
		}
		q.cursor, q.inTurn = t.next, false
		if endedTurns++; endedTurns >= q.ringLen {
			q.fastForward()
			endedTurns = 0
		}
	}
}

// fastForward is called after a whole round in which no tenant could pay
// for its head job. It credits every runnable tenant with the rounds that
// would pass before the first of them can pay, except the last one, which
// next plays out as usual. The outcome equals stepping those rounds one
// by one.
func (q *fairQueue) fastForward() {
	rounds := -1
	q.eachReady(func(t *tenant) {
		need := (cost(&t.ready[0].jobs[0]) - t.deficit + q.quantum - 1) / q.quantum
		if rounds < 0 || need < rounds {
			rounds = need
		}
	})
	if rounds <= 1 {
		return
	}
	q.eachReady(func(t *tenant) { t.deficit += (rounds - 1) * q.quantum })
}

func (q *fairQueue) eachReady(f func(*tenant)) {
	t := q.cursor
	for range q.ringLen {
		if len(t.ready) > 0 {
			f(t)
		}
		t = t.next
	}
}

// dispatch takes the head job of lane l (in t's ready list) and charges t.
func (q *fairQueue) dispatch(t *tenant, l *lane) Job {
	t.deficit -= cost(&l.jobs[0])
	t.ready[0] = nil
	t.ready = t.ready[1:]
	if len(t.ready) == 0 {
		q.readyTenants--
	}
	j := l.jobs[0]
	l.jobs[0] = Job{}
	l.jobs = l.jobs[1:]
	l.busy = true
	if t.queued > q.depth {
		q.overflow--
	}
	t.queued--
	q.total--
	if t.queued == 0 {
		q.ringRemove(t)
		delete(q.tenants, t.name)
	}
	return j
}

// claimIdle marks lane k busy for a job run outside the queue
// (Scheduler.RunNow) when it has no job queued or running; finish ends
// the claim.
func (q *fairQueue) claimIdle(k LaneKey) bool {
	if q.lanes[k] != nil {
		return false
	}
	q.lanes[k] = &lane{key: k, busy: true}
	return true
}

// finish marks lane k idle after its job ran and makes its next job
// runnable.
func (q *fairQueue) finish(k LaneKey) {
	l := q.lanes[k]
	if l == nil || !l.busy {
		panic(fmt.Sprintf("sched: finish on lane %v that is not running", k))
	}
	l.busy = false
	if len(l.jobs) == 0 {
		delete(q.lanes, k)
		return
	}
	q.makeReady(l)
}

// makeReady appends l to the ready list of its head job's tenant.
func (q *fairQueue) makeReady(l *lane) {
	t := q.tenants[l.jobs[0].Tenant]
	t.ready = append(t.ready, l)
	if len(t.ready) == 1 {
		q.readyTenants++
	}
}

// ringInsert adds t at the end of the current round (just before cursor).
func (q *fairQueue) ringInsert(t *tenant) {
	q.ringLen++
	if q.cursor == nil {
		t.prev, t.next = t, t
		q.cursor, q.inTurn = t, false
		return
	}
	t.next, t.prev = q.cursor, q.cursor.prev
	t.prev.next, t.next.prev = t, t
}

// ringRemove unlinks t; if it was its turn, the turn passes on.
func (q *fairQueue) ringRemove(t *tenant) {
	q.ringLen--
	if q.cursor == t {
		q.cursor, q.inTurn = t.next, false
	}
	if q.ringLen == 0 {
		q.cursor = nil
	}
	t.prev.next, t.next.prev = t.next, t.prev
	t.prev, t.next = nil, nil
}

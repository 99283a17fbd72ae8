package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/felixmq/felix/core"
)

// naiveQueue is a reference model of fairQueue: the same rules, written
// with linear scans over one flat list of queued jobs, recomputing every
// derived quantity, and stepping deficit round robin one turn at a time.
type naiveQueue struct {
	quantum, depth, maxQueued int
	jobs                      []Job // every queued job, in push order
	busy                      map[LaneKey]bool
	readySince                map[LaneKey]int // when the lane last became runnable
	clock                     int
	ring                      []string // tenants with queued jobs, in ring order
	cursor                    int
	inTurn                    bool
	deficit                   map[string]int
}

func newNaive(quantum, depth, maxQueued int) *naiveQueue {
	return &naiveQueue{quantum: quantum, depth: depth, maxQueued: maxQueued,
		busy: map[LaneKey]bool{}, readySince: map[LaneKey]int{}, deficit: map[string]int{}}
}

func (n *naiveQueue) queued(tenant string) (c int) {
	for _, j := range n.jobs {
		if j.Tenant == tenant {
			c++
		}
	}
	return c
}

func (n *naiveQueue) overflow() (o int) {
	for _, t := range n.ring {
		o += max(n.queued(t)-n.depth, 0)
	}
	return o
}

func (n *naiveQueue) laneHead(k LaneKey) (int, bool) {
	for i, j := range n.jobs {
		if j.Lane == k {
			return i, true
		}
	}
	return 0, false
}

// readyLanes returns the runnable lanes whose head is tenant's, oldest first.
func (n *naiveQueue) readyLanes(tenant string) []LaneKey {
	var out []LaneKey
	for _, j := range n.jobs {
		if i, _ := n.laneHead(j.Lane); !n.busy[j.Lane] && n.jobs[i].Tenant == tenant && !slices.Contains(out, j.Lane) {
			out = append(out, j.Lane)
		}
	}
	slices.SortFunc(out, func(a, b LaneKey) int { return n.readySince[a] - n.readySince[b] })
	return out
}

func (n *naiveQueue) push(j Job) error {
	if len(n.jobs) >= n.maxQueued || (n.queued(j.Tenant) >= n.depth && n.overflow() >= n.maxQueued/2) {
		return ErrQueueFull
	}
	if !slices.Contains(n.ring, j.Tenant) {
		if len(n.ring) == 0 {
			n.ring, n.cursor, n.inTurn = []string{j.Tenant}, 0, false
		} else {
			n.ring = slices.Insert(n.ring, n.cursor, j.Tenant)
			n.cursor++
		}
		n.deficit[j.Tenant] = 0
	}
	if _, ok := n.laneHead(j.Lane); !ok && !n.busy[j.Lane] {
		n.readySince[j.Lane] = n.clock
		n.clock++
	}
	n.jobs = append(n.jobs, j)
	return nil
}

func (n *naiveQueue) next() (Job, bool) {
	anyReady := false
	for _, t := range n.ring {
		anyReady = anyReady || len(n.readyLanes(t)) > 0
	}
	if !anyReady {
		return Job{}, false
	}
	for {
		t := n.ring[n.cursor]
		ready := n.readyLanes(t)
		if !n.inTurn && len(ready) > 0 {
			n.deficit[t] += n.quantum
			n.inTurn = true
		}
		if n.inTurn && len(ready) > 0 {
			i, _ := n.laneHead(ready[0])
			if c := max(n.jobs[i].Bytes, 1); c <= n.deficit[t] {
				n.deficit[t] -= c
				return n.take(i), true
			}
		} else {
			n.deficit[t] = 0
		}
		n.cursor, n.inTurn = (n.cursor+1)%len(n.ring), false
	}
}

func (n *naiveQueue) take(i int) Job {
	j := n.jobs[i]
	n.jobs = slices.Delete(n.jobs, i, i+1)
	n.busy[j.Lane] = true
	if n.queued(j.Tenant) == 0 {
		r := slices.Index(n.ring, j.Tenant)
		n.ring = slices.Delete(n.ring, r, r+1)
		delete(n.deficit, j.Tenant)
		switch {
		case r < n.cursor:
			n.cursor--
		case r == n.cursor:
			n.inTurn = false
		}
		if n.cursor >= len(n.ring) {
			n.cursor = 0
		}
	}
	return j
}

func (n *naiveQueue) finish(k LaneKey) {
	n.busy[k] = false
	if _, ok := n.laneHead(k); ok {
		n.readySince[k] = n.clock
		n.clock++
	}
}

// check verifies fairQueue's derived counters against its lanes.
func (q *fairQueue) check(t *testing.T) {
	t.Helper()
	total, overflow, ready := 0, 0, 0
	perTenant := map[string]int{}
	for _, l := range q.lanes {
		if !l.busy && len(l.jobs) == 0 {
			t.Fatalf("idle empty lane %v kept", l.key)
		}
		for _, j := range l.jobs {
			perTenant[j.Tenant]++
			total++
		}
	}
	for name, c := range perTenant {
		ten := q.tenants[name]
		if ten == nil || ten.queued != c {
			t.Fatalf("tenant %s: queued %v, lanes hold %d", name, ten, c)
		}
		overflow += max(c-q.depth, 0)
	}
	for _, ten := range q.tenants {
		if len(ten.ready) > 0 {
			ready++
		}
	}
	if total != q.total || overflow != q.overflow || ready != q.readyTenants ||
		len(perTenant) != len(q.tenants) || len(q.tenants) != q.ringLen || total > q.maxQueued {
		t.Fatalf("counters: total %d/%d overflow %d/%d ready %d/%d tenants %d/%d ring %d",
			q.total, total, q.overflow, overflow, q.readyTenants, ready, len(q.tenants), len(perTenant), q.ringLen)
	}
}

// TestFairQueueMatchesNaiveModel drives fairQueue and the naive model
// with the same random pushes, picks and finishes and requires identical
// admissions and identical pick order.
func TestFairQueueMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compareWithNaive(t, seed) })
	}
}

func compareWithNaive(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	const quantum = 100
	depth, maxQueued := 1+rng.IntN(6), 4+rng.IntN(30)
	fast, naive := newFairQueue(quantum, depth, maxQueued), newNaive(quantum, depth, maxQueued)
	tenants := []string{"a", "b", "c", "d"}[:1+rng.IntN(4)]
	maxBytes := []int{quantum, 3 * quantum, 20 * quantum}[rng.IntN(3)]
	var running []LaneKey
	lastRun := -1
	for step := range 1000 {
		switch op := rng.IntN(10); {
		case op < 5:
			id := step
			j := Job{
				Tenant: tenants[rng.IntN(len(tenants))],
				Lane:   LaneKey{Stream: core.StreamKey{Tenant: "x", Namespace: "n", Stream: "s"}, Shard: uint32(rng.IntN(6))},
				Bytes:  rng.IntN(maxBytes + 1),
				Run:    func() { lastRun = id },
			}
			ef, en := fast.push(j), naive.push(j)
			if ef != en {
				t.Fatalf("step %d: push %v: fast %v, naive %v", step, j.Tenant, ef, en)
			}
		case op < 8:
			jf, okf := fast.next()
			jn, okn := naive.next()
			if okf != okn {
				t.Fatalf("step %d: next ok fast %v naive %v", step, okf, okn)
			}
			if !okf {
				break
			}
			jf.Run()
			idf := lastRun
			jn.Run()
			if idf != lastRun {
				t.Fatalf("step %d: fast picked job %d, naive job %d", step, idf, lastRun)
			}
			running = append(running, jf.Lane)
		default:
			if len(running) == 0 {
				break
			}
			i := rng.IntN(len(running))
			fast.finish(running[i])
			naive.finish(running[i])
			running = slices.Delete(running, i, i+1)
		}
		fast.check(t)
	}
}

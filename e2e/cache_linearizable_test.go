package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	felix "github.com/felixmq/felix/sdk/felix"
)

// kvInput is one cache call of the linearizability history.
type kvInput struct {
	op    string // put, get, putif, delete
	key   string
	value string
	// putif's condition: absent, or the entry at version.
	absent  bool
	version uint64
}

// kvOutput is its answer; unknown when the call failed (the broker was
// killed under it), so it may or may not have taken effect.
type kvOutput struct {
	unknown    bool
	found      bool // get, delete
	value      string
	version    uint64 // get; putif: the version written, or the current one
	applied    bool   // putif
	hasVersion bool   // putif refused: whether the key had an entry
}

// kvState is one key's state in the model. A version is the log offset
// of the put that wrote the value, so the versions of one key only grow;
// version 0 means not learnt yet (a plain put's answer carries none), and
// is then known to be above floor, the highest version the key had before.
type kvState struct {
	present bool
	value   string
	version uint64
	floor   uint64
}

// kvStep is the model of a log-backed cache key: every possible state
// after in answered out from s (none: the answer is impossible).
func kvStep(s kvState, in kvInput, out kvOutput) []kvState {
	versionOK := func(v uint64) bool {
		if s.version != 0 {
			return s.version == v
		}
		return v > s.floor
	}
	hi := max(s.version, s.floor)
	written := func(value string, version uint64) kvState {
		return kvState{present: true, value: value, version: version, floor: hi}
	}
	condMayHold := (in.absent && !s.present) || (!in.absent && s.present && versionOK(in.version))
	if out.unknown {
		next := []kvState{s}
		switch {
		case in.op == "put", in.op == "putif" && condMayHold:
			next = append(next, written(in.value, 0))
		case in.op == "delete":
			next = append(next, kvState{floor: hi})
		}
		return next
	}
	switch in.op {
	case "put":
		return []kvState{written(in.value, 0)}
	case "get":
		if !out.found {
			if s.present {
				return nil
			}
			return []kvState{s}
		}
		if !s.present || s.value != out.value || !versionOK(out.version) {
			return nil
		}
		return []kvState{{present: true, value: s.value, version: out.version, floor: s.floor}}
	case "delete":
		if out.found != s.present || (out.found && out.value != s.value) {
			return nil
		}
		return []kvState{{floor: hi}}
	case "putif":
		if out.applied {
			if !condMayHold || out.version <= hi {
				return nil
			}
			return []kvState{written(in.value, out.version)}
		}
		if !out.hasVersion {
			if s.present {
				return nil
			}
			return []kvState{s}
		}
		if !s.present || !versionOK(out.version) || (!in.absent && out.version == in.version) {
			return nil
		}
		return []kvState{{present: true, value: s.value, version: out.version, floor: s.floor}}
	}
	return nil
}

var kvModel = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{kvState{}} },
	Step: func(s, in, out interface{}) []interface{} {
		var next []interface{}
		for _, n := range kvStep(s.(kvState), in.(kvInput), out.(kvOutput)) {
			next = append(next, n)
		}
		return next
	},
	DescribeOperation: func(in, out interface{}) string { return fmt.Sprintf("%+v -> %+v", in, out) },
}).ToModel()

// kvHistory collects the operations of every client.
type kvHistory struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

func (h *kvHistory) add(client int, in kvInput, call time.Time, out kvOutput) {
	ret := time.Now().UnixNano()
	if out.unknown {
		ret = math.MaxInt64 // it may take effect at any time from its call on
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call.UnixNano(), Output: out, Return: ret})
}

// kvClient runs random calls on two contended keys until ctx ends or a
// call fails (a failed get is left out: it changed nothing).
func kvClient(ctx context.Context, c *felix.Client, cache string, client, cycle int, rng *rand.Rand, h *kvHistory) {
	versions := map[string]uint64{}
	for seq := 0; ctx.Err() == nil; seq++ {
		in := kvInput{key: []string{"x", "y"}[rng.IntN(2)], value: fmt.Sprintf("c%d-%d-%d", cycle, client, seq)}
		call := time.Now()
		var out kvOutput
		var err error
		switch r := rng.IntN(10); {
		case r < 3:
			in.op = "put"
			err = c.CachePut(ctx, "default", cache, in.key, []byte(in.value), 0)
		case r < 6:
			in.op = "get"
			var v []byte
			v, out.version, out.found, err = c.CacheGetVersioned(ctx, "default", cache, in.key)
			out.value = string(v)
			if err == nil && out.found {
				versions[in.key] = out.version
			}
		case r < 9:
			in.op = "putif"
			in.version, in.absent = versions[in.key], versions[in.key] == 0
			cond := felix.IfAbsent()
			if !in.absent {
				cond = felix.IfVersion(in.version)
			}
			var res felix.CondResult
			res, err = c.CachePutIf(ctx, "default", cache, in.key, []byte(in.value), 0, cond)
			out.applied, out.version, out.hasVersion = res.Applied, res.Version, res.HasVersion
			if err == nil && res.HasVersion {
				versions[in.key] = res.Version
			}
		default:
			in.op = "delete"
			var v []byte
			v, out.found, err = c.CacheDelete(ctx, "default", cache, in.key)
			out.value = string(v)
			versions[in.key] = 0
		}
		if err != nil {
			if in.op != "get" {
				h.add(client, in, call, kvOutput{unknown: true})
			}
			return
		}
		h.add(client, in, call, out)
	}
}

// TestCacheHistoryIsLinearizableAcrossSIGKILL: clients put, get,
// compare-and-set and delete two contended keys of a log-backed cache
// (fsync always) while felix serve is SIGKILLed and restarted; the whole
// history, calls cut off by a kill included as of unknown outcome, is
// linearizable against a model of a versioned key (checked with
// porcupine).
func TestCacheHistoryIsLinearizableAcrossSIGKILL(t *testing.T) {
	dir := t.TempDir()
	env := []string{"FELIX_DURABLE_FSYNC=always"}
	rng := rand.New(rand.NewPCG(23, 5))
	const clients, cycles = 4, 3
	h := &kvHistory{}
	for cycle := range cycles {
		n := startServeIn(t, dir, env...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if cycle == 0 {
			n.mustFelix(ctx, "admin", "cache", "create", "lin")
		}
		cacheReady(t, ctx, n, "lin").Close()
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			crng := rand.New(rand.NewPCG(uint64(cycle), uint64(i)))
			go func() {
				defer wg.Done()
				c := n.connect(ctx, n.adminToken())
				defer c.Close()
				kvClient(ctx, c, "lin", i, cycle, crng, h)
			}()
		}
		time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
		n.stop(syscall.SIGKILL, 10*time.Second)
		wg.Wait()
		cancel()
	}
	// A last, quiet look at both keys after the final restart.
	n := startServeIn(t, dir, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := cacheReady(t, ctx, n, "lin")
	for _, k := range []string{"x", "y"} {
		call := time.Now()
		v, ver, found, err := c.CacheGetVersioned(ctx, "default", "lin", k)
		if err != nil {
			t.Fatal(err)
		}
		h.add(clients, kvInput{op: "get", key: k}, call, kvOutput{found: found, value: string(v), version: ver})
	}
	res := porcupine.CheckOperationsTimeout(kvModel, h.ops, 60*time.Second)
	t.Logf("%d operations over %d kills: %v", len(h.ops), cycles, res)
	if res == porcupine.Illegal {
		t.Fatal("the cache's history is not linearizable")
	}
	if res != porcupine.Ok {
		t.Fatalf("the linearizability check did not finish: %v", res)
	}
}

// TestKVModelRefusesWhatACacheMustNotDo: the model behind the
// linearizability check accepts a legal history and refuses a lost
// acknowledged put, a stale read, a compare-and-set applied at a stale
// version and a version that changed without a write.
func TestKVModelRefusesWhatACacheMustNotDo(t *testing.T) {
	op := func(client int, call, ret int64, in kvInput, out kvOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	put := func(v string) kvInput { return kvInput{op: "put", key: "x", value: v} }
	get := kvInput{op: "get", key: "x"}
	got := func(v string, ver uint64) kvOutput { return kvOutput{found: true, value: v, version: ver} }
	legal := []porcupine.Operation{
		op(0, 0, 10, put("a"), kvOutput{}),
		op(1, 20, 30, get, got("a", 5)),
		op(0, 40, 50, kvInput{op: "putif", key: "x", value: "b", version: 5}, kvOutput{applied: true, version: 7, hasVersion: true}),
		op(1, 45, math.MaxInt64, put("c"), kvOutput{unknown: true}),
		op(1, 60, 70, get, got("b", 7)),
	}
	if !porcupine.CheckOperations(kvModel, legal) {
		t.Fatal("a legal history was refused")
	}
	for name, h := range map[string][]porcupine.Operation{
		"lost put": {op(0, 0, 10, put("a"), kvOutput{}), op(1, 20, 30, get, kvOutput{})},
		"stale read": {op(0, 0, 10, put("a"), kvOutput{}), op(0, 20, 30, put("b"), kvOutput{}),
			op(1, 40, 50, get, got("a", 1))},
		"stale compare-and-set": {op(0, 0, 10, put("a"), kvOutput{}), op(1, 20, 30, get, got("a", 1)),
			op(0, 40, 50, put("b"), kvOutput{}),
			op(1, 60, 70, kvInput{op: "putif", key: "x", value: "c", version: 1}, kvOutput{applied: true, version: 9, hasVersion: true})},
		"version moved": {op(0, 0, 10, put("a"), kvOutput{}), op(1, 20, 30, get, got("a", 1)), op(1, 40, 50, get, got("a", 2))},
	} {
		if porcupine.CheckOperations(kvModel, h) {
			t.Errorf("%s: an illegal history was accepted", name)
		}
	}
}

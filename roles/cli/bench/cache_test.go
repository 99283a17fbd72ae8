package bench

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestCacheRejectsUnknownMode(t *testing.T) {
	_, err := runCacheMode(context.Background(), nil, cacheParams{mode: "sometimes"})
	if err == nil || !strings.Contains(err.Error(), "--mode") {
		t.Fatalf("want a --mode error, got %v", err)
	}
}

func TestCASBumpKeepsTheValueAndCounts(t *testing.T) {
	v := []byte{0, 0, 0, 0, 0, 0, 0, 41, 'x', 'y'}
	got := casBump(v)
	if casCounter(got) != 42 || string(got[8:]) != "xy" || casCounter(v) != 41 {
		t.Fatalf("bumped %v to %v", v, got)
	}
	if got := casBump(nil); len(got) != casCounterBytes || casCounter(got) != 1 {
		t.Fatalf("bumped nothing to %v", got)
	}
}

// register is a naive versioned key: the model a compare-and-set store
// must behave like. Each call takes a millisecond (of synctest's clock),
// so callers interleave between their read and their write. With lose
// set, every third applied write is acknowledged but not stored.
type register struct {
	mu      sync.Mutex
	value   []byte
	version uint64
	writes  int
	lose    bool
}

func (r *register) ops() casOps {
	return casOps{
		read: func(ctx context.Context) ([]byte, uint64, error) {
			time.Sleep(time.Millisecond)
			r.mu.Lock()
			defer r.mu.Unlock()
			return append([]byte(nil), r.value...), r.version, nil
		},
		write: func(ctx context.Context, v []byte, version uint64) (bool, error) {
			time.Sleep(time.Millisecond)
			r.mu.Lock()
			defer r.mu.Unlock()
			if version != r.version {
				return false, nil
			}
			r.writes++
			if r.lose && r.writes%3 == 0 {
				return true, nil
			}
			r.value, r.version = v, r.version+1
			return true, nil
		},
	}
}

func figuresOf(r *result) map[string]float64 {
	f := map[string]float64{}
	for _, x := range r.Figures {
		f[x.Name] = x.Value
	}
	return f
}

func TestCASCountsAppliedAndRefusedUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &register{value: make([]byte, 256)}
		r, err := runCAS(context.Background(), nil, reg.ops(), 8, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		f := figuresOf(r)
		if f["applied"] <= 0 || f["applied"] != float64(casCounter(reg.value)) || f["applied"] != float64(reg.version) {
			t.Fatalf("applied %v, but the key's counter is %d at version %d", f["applied"], casCounter(reg.value), reg.version)
		}
		// Eight callers on one key: most writes lose the race.
		if f["refused"] <= 0 || f["writes_per_update"] != (f["applied"]+f["refused"])/f["applied"] {
			t.Fatalf("refused %v, writes per update %v", f["refused"], f["writes_per_update"])
		}
		if f["errors"] != 0 || f["unconfirmed"] != 0 || f["update_p50"] < 2 || len(reg.value) != 256 {
			t.Fatalf("figures %v, value %d bytes", f, len(reg.value))
		}
	})
}

func TestCASFailsWhenAnAcknowledgedUpdateIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &register{value: make([]byte, 8), lose: true}
		_, err := runCAS(context.Background(), nil, reg.ops(), 4, time.Second)
		if err == nil || !strings.Contains(err.Error(), "applied updates") {
			t.Fatalf("a register that drops acknowledged writes passed: %v", err)
		}
	})
}

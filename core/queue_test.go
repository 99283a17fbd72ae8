package core

import (
	"math/rand/v2"
	"testing"
)

// TestQueueMatchesNaiveModel drives the ring-buffer queue and a plain
// slice model with the same random pushes and pops.
func TestQueueMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		capItems, capBytes := 1+r.IntN(10), int64(1+r.IntN(200))
		q := newQueue(capItems, capBytes, nil)
		var backlog []*Envelope
		for range r.IntN(5) {
			backlog = append(backlog, &Envelope{Payloads: [][]byte{make([]byte, r.IntN(100))}})
		}
		q.preload(backlog)
		model := append([]*Envelope(nil), backlog...)
		extraItems, extraBytes := len(backlog), int64(0)
		for _, e := range backlog {
			extraBytes += int64(e.Size())
		}
		modelBytes := extraBytes
		for step := range 2000 {
			if r.IntN(3) > 0 {
				e := &Envelope{Payloads: [][]byte{make([]byte, r.IntN(80))}}
				size := int64(e.Size())
				fits := len(model) == 0 ||
					(len(model) < capItems+extraItems && modelBytes+size <= capBytes+extraBytes)
				got := q.tryPush(e)
				if (got == pushed) != fits {
					t.Fatalf("seed %d step %d: push %v, model fits %v (n %d bytes %d)", seed, step, got, fits, len(model), modelBytes)
				}
				if fits {
					model = append(model, e)
					modelBytes += size
				}
				continue
			}
			e, ok := q.pop()
			if ok != (len(model) > 0) || (ok && e != model[0]) {
				t.Fatalf("seed %d step %d: pop mismatch", seed, step)
			}
			if ok {
				model = model[1:]
				modelBytes -= int64(e.Size())
				if extraItems > 0 {
					extraItems--
					extraBytes -= int64(e.Size())
				}
			}
			if n, b := q.depth(); n != len(model) || b != modelBytes {
				t.Fatalf("seed %d step %d: depth %d/%d model %d/%d", seed, step, n, b, len(model), modelBytes)
			}
		}
	}
}

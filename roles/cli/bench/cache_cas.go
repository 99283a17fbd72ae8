package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// The cas mode: callers in a read-modify-write loop on one key. Each
// update reads the key with its version, adds one to the counter in the
// value's first casCounterBytes bytes and writes it back on condition
// that the version is unchanged; a refused write reads again. At the end
// the counter must equal the updates applied (plus, at most, those whose
// answer was lost), so a lost update fails the run.

// casKey is the key every caller updates.
const casKey = "cas"

// casCounterBytes is the big-endian counter at the start of the value.
const casCounterBytes = 8

// casOps are one key's versioned read and conditional write.
type casOps struct {
	// read returns the key's value and version; a missing key is an error.
	read func(ctx context.Context) (value []byte, version uint64, err error)
	// write stores value if the key is still at version: applied false
	// means the condition failed.
	write func(ctx context.Context, value []byte, version uint64) (applied bool, err error)
}

// casTally is what the callers counted.
type casTally struct {
	applied, refused *atomic.Int64 // updates applied; writes refused
	errors           atomic.Int64  // updates that ended in a failed call
	firstErr         atomic.Value  // error
	updates          []*latencies  // per caller: first read to applied write
}

func newCASTally(p *progress) *casTally {
	return &casTally{applied: p.counter("applied"), refused: p.counter("refused")}
}

// casCounter is the counter a value carries.
func casCounter(v []byte) uint64 {
	var b [casCounterBytes]byte
	copy(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// casBump returns a copy of v with its counter one higher, at least
// casCounterBytes long.
func casBump(v []byte) []byte {
	out := make([]byte, max(len(v), casCounterBytes))
	copy(out, v)
	binary.BigEndian.PutUint64(out, casCounter(v)+1)
	return out
}

// casLoop runs callers update loops on ops until d has passed and counts
// into tally. An update still being retried when time is up is not
// counted as applied or timed.
func casLoop(ctx context.Context, ops casOps, callers int, d time.Duration, tally *casTally) {
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	tally.updates = make([]*latencies, callers)
	for i := range callers {
		lat := newLatencies(max(100, 100000/callers))
		tally.updates[i] = lat
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) && ctx.Err() == nil {
				t0 := time.Now()
				ok, err := casUpdate(ctx, ops, stop, tally.refused)
				switch {
				case err != nil:
					if tally.errors.Add(1) == 1 {
						tally.firstErr.Store(err)
					}
				case ok:
					lat.add(time.Since(t0))
					tally.applied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
}

// casUpdate reads and conditionally writes until a write is applied, time
// is up or a call fails.
func casUpdate(ctx context.Context, ops casOps, stop time.Time, refused *atomic.Int64) (bool, error) {
	for time.Now().Before(stop) && ctx.Err() == nil {
		v, version, err := ops.read(ctx)
		if err != nil {
			return false, err
		}
		ok, err := ops.write(ctx, casBump(v), version)
		if err != nil || ok {
			return ok, err
		}
		refused.Add(1)
	}
	return false, nil
}

// runCAS runs the loop on ops, whose key holds counter 0, and checks the
// final counter against the updates applied.
func runCAS(ctx context.Context, prog *progress, ops casOps, callers int, d time.Duration) (*result, error) {
	tally := newCASTally(prog)
	start := time.Now()
	casLoop(ctx, ops, callers, d, tally)
	secs := time.Since(start).Seconds()
	applied, refused, errs := tally.applied.Load(), tally.refused.Load(), tally.errors.Load()
	if applied == 0 && errs > 0 {
		return nil, fmt.Errorf("cas: no update applied; first error: %w", tally.firstErr.Load().(error))
	}
	final, _, err := ops.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("cas: reading the final value: %w", err)
	}
	// An update whose answer was lost (an error after the write was sent)
	// may have been applied; no acknowledged one may be missing.
	counter := int64(casCounter(final))
	if counter < applied || counter > applied+errs {
		return nil, fmt.Errorf("cas: the counter is %d after %d applied updates and %d failed calls", counter, applied, errs)
	}
	all := newLatencies(100000)
	for _, l := range tally.updates {
		all.merge(l)
	}
	r := &result{Params: map[string]any{"callers": callers}}
	r.add("measured_s", secs, "s")
	r.add("applied", float64(applied), "updates")
	r.add("refused", float64(refused), "writes")
	r.add("applied_per_s", float64(applied)/secs, "updates/s")
	r.add("refused_per_s", float64(refused)/secs, "writes/s")
	r.add("writes_per_update", float64(applied+refused)/float64(max(1, applied)), "writes")
	r.add("errors", float64(errs), "errors")
	r.add("unconfirmed", float64(counter-applied), "updates")
	r.addLatency("update", all)
	return r, nil
}

// runCacheCAS is the cas mode against the broker: CacheGetVersioned and
// CachePutIf(IfVersion).
func runCacheCAS(ctx context.Context, t *target, c *felix.Client, cache string, p cacheParams) (*result, error) {
	if err := c.CachePut(ctx, t.ns, cache, casKey, make([]byte, p.value), 0); err != nil {
		return nil, err
	}
	ops := casOps{
		read: func(ctx context.Context) ([]byte, uint64, error) {
			v, version, found, err := c.CacheGetVersioned(ctx, t.ns, cache, casKey)
			if err == nil && !found {
				err = errors.New("cas: the key is gone")
			}
			return v, version, err
		},
		write: func(ctx context.Context, v []byte, version uint64) (bool, error) {
			res, err := c.CachePutIf(ctx, t.ns, cache, casKey, v, 0, felix.IfVersion(version))
			return res.Applied, err
		},
	}
	return runCAS(ctx, t.progress, ops, max(1, p.callers), p.duration)
}

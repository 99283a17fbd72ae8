package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The cache workloads' peer load, the same shapes as `felix bench cache
// --mode put|latency|cas`, over any key/value store's put, versioned read
// and conditional write. Every call is bounded by opTimeout.

const opTimeout = 10 * time.Second

// kvPut stores value under key and returns once the server acknowledged it.
type kvPut func(ctx context.Context, key string, value []byte) error

// withOpTimeout runs f with a ctx bounded by opTimeout.
func withOpTimeout(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return f(ctx)
}

// putLoad keeps inflight acknowledged puts going (each caller waits for its
// put before the next) on random keys of keys for d. Only acknowledged
// puts count.
func putLoad(ctx context.Context, inflight, keys, value int, d time.Duration, put kvPut) (figures, error) {
	val := make([]byte, value)
	rec := newRecorder(100000)
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for w := range max(1, inflight) {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed*7+1))
			for ctx.Err() == nil && time.Now().Before(stop) {
				key := fmt.Sprintf("k%d", rng.IntN(keys))
				t0 := time.Now()
				if err := withOpTimeout(ctx, func(ctx context.Context) error { return put(ctx, key, val) }); err != nil {
					if failed.Add(1) == 1 {
						firstErr.Store(err)
					}
					continue
				}
				rec.add(time.Since(t0))
				ok.Add(1)
			}
		}(uint64(w + 1))
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	q := rec.quantilesMS(0.5, 0.99)
	if q == nil {
		if err, isErr := firstErr.Load().(error); isErr {
			return nil, err
		}
		return nil, errors.New("no put acknowledged")
	}
	n := float64(ok.Load())
	return figures{"puts_per_s": n / secs, "put_mb_per_s": n * float64(value) / secs / 1e6,
		"p50_ms": q[0], "p99_ms": q[1], "errors": float64(failed.Load())}, ctx.Err()
}

// putLatency sends one acknowledged put at a time for d, the keys taken in
// turn; the first failure ends the run.
func putLatency(ctx context.Context, keys, value int, d time.Duration, put kvPut) (figures, error) {
	val := make([]byte, value)
	rec := newRecorder(100000)
	start := time.Now()
	n := 0
	for ; ctx.Err() == nil && time.Since(start) < d; n++ {
		key := fmt.Sprintf("k%d", n%keys)
		t0 := time.Now()
		if err := withOpTimeout(ctx, func(ctx context.Context) error { return put(ctx, key, val) }); err != nil {
			return nil, err
		}
		rec.add(time.Since(t0))
	}
	q := rec.quantilesMS(0.5, 0.99, 0.999)
	if q == nil {
		return nil, errors.New("no put completed")
	}
	return figures{"p50_ms": q[0], "p99_ms": q[1], "p999_ms": q[2], "puts_per_s": float64(n) / time.Since(start).Seconds()}, ctx.Err()
}

// casCounterBytes is the big-endian counter at the start of a cas value.
const casCounterBytes = 8

// kvCAS is one key's versioned read and conditional write.
type kvCAS struct {
	// read returns the key's value and version; a missing key is an error.
	read func(ctx context.Context) ([]byte, uint64, error)
	// write stores value if the key is still at version; false: refused.
	write func(ctx context.Context, value []byte, version uint64) (bool, error)
}

func casCounter(v []byte) uint64 {
	var b [casCounterBytes]byte
	copy(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// casBump is v with its counter one higher.
func casBump(v []byte) []byte {
	out := make([]byte, max(len(v), casCounterBytes))
	copy(out, v)
	binary.BigEndian.PutUint64(out, casCounter(v)+1)
	return out
}

// casLoad runs callers read-modify-write loops on one key whose value
// holds counter 0: read with the version, add one to the counter, write
// back on condition of the version, read again when refused. It reports
// the updates applied and writes refused per second and the time from an
// update's first read to its applied write, and fails if the final
// counter is not the updates applied (give or take calls whose answer was
// lost).
func casLoad(ctx context.Context, callers int, d time.Duration, ops kvCAS) (figures, error) {
	rec := newRecorder(100000)
	var applied, refused, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	stop := start.Add(d)
	update := func() (bool, error) {
		for ctx.Err() == nil && time.Now().Before(stop) {
			var v []byte
			var version uint64
			err := withOpTimeout(ctx, func(ctx context.Context) (err error) { v, version, err = ops.read(ctx); return err })
			if err != nil {
				return false, err
			}
			var ok bool
			err = withOpTimeout(ctx, func(ctx context.Context) (err error) { ok, err = ops.write(ctx, casBump(v), version); return err })
			if err != nil || ok {
				return ok, err
			}
			refused.Add(1)
		}
		return false, nil
	}
	var wg sync.WaitGroup
	for range max(1, callers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(stop) {
				t0 := time.Now()
				ok, err := update()
				switch {
				case err != nil:
					if failed.Add(1) == 1 {
						firstErr.Store(err)
					}
				case ok:
					rec.add(time.Since(t0))
					applied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	q := rec.quantilesMS(0.5, 0.99)
	if q == nil {
		if err, isErr := firstErr.Load().(error); isErr {
			return nil, err
		}
		return nil, errors.New("no update applied")
	}
	var final []byte
	if err := withOpTimeout(ctx, func(ctx context.Context) (err error) { final, _, err = ops.read(ctx); return err }); err != nil {
		return nil, fmt.Errorf("reading the final value: %w", err)
	}
	a, errs, counter := applied.Load(), failed.Load(), int64(casCounter(final))
	if counter < a || counter > a+errs {
		return nil, fmt.Errorf("the counter is %d after %d applied updates and %d failed calls", counter, a, errs)
	}
	return figures{
		"applied_per_s":     float64(a) / secs,
		"refused_per_s":     float64(refused.Load()) / secs,
		"writes_per_update": float64(a+refused.Load()) / float64(max(1, a)),
		"update_p50_ms":     q[0],
		"update_p99_ms":     q[1],
		"errors":            float64(errs),
	}, ctx.Err()
}

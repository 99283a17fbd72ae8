package main

import (
	"slices"
	"sync"
	"time"
)

// schedule is a fixed offered rate: message i is due at start + i*interval,
// whenever it is actually sent. Latency is measured from the due time, so a
// sender that stalls is charged for every message it delayed (no
// coordinated omission).
type schedule struct {
	start    time.Time
	interval time.Duration
}

func newSchedule(start time.Time, rate int) schedule {
	return schedule{start: start, interval: time.Second / time.Duration(max(1, rate))}
}

// due is the intended send time of message i.
func (s schedule) due(i int64) time.Time { return s.start.Add(time.Duration(i) * s.interval) }

// count is how many messages fit in d.
func (s schedule) count(d time.Duration) int64 { return int64((d + s.interval - 1) / s.interval) }

// recorder keeps up to max latency samples; past that it keeps every k-th
// so a long run stays representative in bounded memory. Safe for
// concurrent use.
type recorder struct {
	mu      sync.Mutex
	max     int
	stride  int
	seen    int
	samples []time.Duration
}

func newRecorder(max int) *recorder { return &recorder{max: max, stride: 1} }

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	if r.seen%r.stride != 0 {
		return
	}
	if len(r.samples) >= r.max {
		kept := r.samples[:0]
		for i := 0; i < len(r.samples); i += 2 {
			kept = append(kept, r.samples[i])
		}
		r.samples, r.stride = kept, r.stride*2
	}
	r.samples = append(r.samples, d)
}

// quantilesMS returns the given quantiles in milliseconds; nil if empty.
func (r *recorder) quantilesMS(qs ...float64) []float64 {
	r.mu.Lock()
	s := slices.Clone(r.samples)
	r.mu.Unlock()
	if len(s) == 0 {
		return nil
	}
	v := make([]float64, len(s))
	for i, d := range s {
		v[i] = float64(d) / float64(time.Millisecond)
	}
	slices.Sort(v)
	out := make([]float64, len(qs))
	for i, q := range qs {
		out[i] = percentile(v, q)
	}
	return out
}

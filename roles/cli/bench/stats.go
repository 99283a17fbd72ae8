package bench

import (
	"fmt"
	"sort"
	"time"
)

// latencies collects a bounded number of samples; past the bound it keeps
// every k-th so long runs stay representative without growing.
type latencies struct {
	max     int
	samples []time.Duration
	seen    int
	stride  int
}

func newLatencies(max int) *latencies { return &latencies{max: max, stride: 1} }

func (l *latencies) add(d time.Duration) {
	l.seen++
	if l.seen%l.stride != 0 {
		return
	}
	if len(l.samples) >= l.max {
		// Halve what is kept and sample half as often.
		kept := l.samples[:0]
		for i := 0; i < len(l.samples); i += 2 {
			kept = append(kept, l.samples[i])
		}
		l.samples = kept
		l.stride *= 2
	}
	l.samples = append(l.samples, d)
}

func (l *latencies) merge(o *latencies) {
	for _, d := range o.samples {
		l.add(d)
	}
}

// quantile returns the q-quantile (0..1) of the samples.
func (l *latencies) quantile(q float64) time.Duration {
	if len(l.samples) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), l.samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q * float64(len(s)-1))
	return s[i]
}

// result is one scenario's figures, printed as "name value unit" rows.
type result struct {
	Scenario string         `json:"scenario"`
	Params   map[string]any `json:"params"`
	Figures  []figure       `json:"figures"`
}

type figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

func (r *result) add(name string, v float64, unit string) {
	r.Figures = append(r.Figures, figure{Name: name, Value: v, Unit: unit})
}

func (r *result) addLatency(prefix string, l *latencies) {
	r.add(prefix+"_p50", ms(l.quantile(0.50)), "ms")
	r.add(prefix+"_p99", ms(l.quantile(0.99)), "ms")
	r.add(prefix+"_p999", ms(l.quantile(0.999)), "ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (r *result) text() string {
	s := fmt.Sprintf("scenario %s", r.Scenario)
	keys := make([]string, 0, len(r.Params))
	for k := range r.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s += fmt.Sprintf(" %s=%v", k, r.Params[k])
	}
	s += "\n"
	for _, f := range r.Figures {
		s += fmt.Sprintf("  %-28s %14.2f %s\n", f.Name, f.Value, f.Unit)
	}
	return s
}

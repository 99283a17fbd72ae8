package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// runWorkload runs the warm-up rounds and then the measured rounds of one
// workload, each round running every case on Felix over each selected
// transport (QUIC, then TCP) and then on the peer, and stops the
// workload's servers at the end.
func runWorkload(ctx context.Context, e *env, w workload) []*Series {
	if w.pending != "" {
		return []*Series{{Workload: w.name, Metric: "—", Peer: w.peer, Pending: w.pending, Note: w.note}}
	}
	defer e.stop("")
	var cases []caseSpec
	var runs [][]string // by case: the transports it runs over
	for _, c := range w.cases(e.o) {
		trs := caseTransports(c, e.o.transports)
		if len(trs) == 0 {
			logf("%s %s: skipped, it has no TCP variant (%s) and --transports leaves out quic", w.name, c.name, c.noTCP)
			continue
		}
		cases, runs = append(cases, c), append(runs, trs)
	}
	series := make([][]*Series, len(cases))
	for i, c := range cases {
		for _, m := range c.metrics {
			s := &Series{Workload: w.name, Case: c.name, Metric: m.label, Unit: m.unit, Lower: m.lower, Note: w.note,
				Transports: runs[i], NoTCP: c.noTCP}
			if c.peer != nil && m.peerKey != "" {
				s.Peer = cmp.Or(c.peerName, w.peer)
			}
			series[i] = append(series[i], s)
		}
	}
	warmup := e.o.warmup
	if w.noWarmup != "" {
		warmup = 0
	}
	for round := -warmup; round < e.o.rounds && ctx.Err() == nil; round++ {
		label := fmt.Sprintf("round %d/%d", round+1, e.o.rounds)
		if round < 0 {
			label = "warm-up"
		}
		for i, c := range cases {
			rs := make([]Round, len(c.metrics))
			for _, tr := range runs[i] {
				if ctx.Err() != nil {
					break
				}
				arg := tr
				if c.noTCP != "" {
					arg = ""
				}
				ff, ferr := c.felix(ctx, e, arg)
				logf("%s %s [%s] felix %s: %s", w.name, c.name, label, tr, brief(c.metrics, ff, ferr, true))
				for j, m := range c.metrics {
					v, msg := pick(ff, ferr, m.felixKey)
					rs[j].setFelix(tr, v, msg)
				}
			}
			var pf figures
			var perr error
			if c.peer != nil && ctx.Err() == nil {
				pf, perr = c.peer(ctx, e)
				logf("%s %s [%s] peer:  %s", w.name, c.name, label, brief(c.metrics, pf, perr, false))
			}
			if round < 0 {
				continue
			}
			for j, m := range c.metrics {
				if series[i][j].Peer != "" {
					rs[j].Peer, rs[j].PeerErr = pick(pf, perr, m.peerKey)
				}
				series[i][j].Rounds = append(series[i][j].Rounds, rs[j])
			}
		}
	}
	var out []*Series
	for _, ss := range series {
		for _, s := range ss {
			if warn := e.warnings[w.name]; warn != "" {
				s.Note = strings.TrimSpace(s.Note + " " + warn)
			}
			s.summarizeAll()
			out = append(out, s)
		}
	}
	return out
}

// caseTransports is the transports case c runs over when the selected
// ones run: all of them, or for a case without a TCP variant, QUIC alone
// (its one run, filed as QUIC) if QUIC is selected.
func caseTransports(c caseSpec, selected []string) []string {
	if c.noTCP == "" {
		return selected
	}
	if slices.Contains(selected, transportQUIC) {
		return []string{transportQUIC}
	}
	return nil
}

func pick(f figures, err error, key string) (*float64, string) {
	if err != nil {
		return nil, err.Error()
	}
	if f == nil {
		return nil, "not run"
	}
	v, ok := f[key]
	if !ok {
		return nil, "no figure " + key
	}
	return &v, ""
}

// brief is one progress line: the case's figures or the error.
func brief(ms []metric, f figures, err error, felix bool) string {
	if err != nil {
		return "error: " + clip(err.Error(), 300)
	}
	var parts []string
	for _, m := range ms {
		key := m.peerKey
		if felix {
			key = m.felixKey
		}
		if v, ok := f[key]; ok && key != "" {
			parts = append(parts, fmt.Sprintf("%s %s %s", m.label, num(v), m.unit))
		}
	}
	return strings.Join(parts, ", ")
}

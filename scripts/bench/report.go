package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// renderTable prints every series as one markdown table row: Felix's
// median and range over the rounds for each transport the run compared
// (QUIC alone when transports is empty, as in results from before TCP),
// the peer's, and the median and range of the per-round Felix/peer ratios,
// one per transport.
func renderTable(series []*Series, transports []string) string {
	if len(transports) == 0 {
		transports = []string{transportQUIC}
	}
	head := []string{"workload", "case", "metric"}
	for _, tr := range transports {
		head = append(head, "Felix "+transportName(tr)+" median (min–max)")
	}
	head = append(head, "peer", "peer median (min–max)")
	for _, tr := range transports {
		head = append(head, transportName(tr)+"/peer median (min–max)")
	}
	var b strings.Builder
	b.WriteString("| " + strings.Join(head, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat(" --- |", len(head)) + "\n")
	for _, s := range series {
		b.WriteString("| " + strings.Join(row(s, transports), " | ") + " |\n")
	}
	return b.String()
}

// transportName is how the tables name a transport.
func transportName(tr string) string { return strings.ToUpper(tr) }

// row is one series' cells under renderTable's header.
func row(s *Series, transports []string) []string {
	metric := s.Metric
	if s.Unit != "" {
		metric += " (" + s.Unit + ")"
	}
	if s.Lower {
		metric += ", lower is better"
	}
	felix := make([]string, len(transports))
	ratio := make([]string, len(transports))
	peer, peerName := "—", cmp.Or(s.Peer, "—")
	for i, tr := range transports {
		felix[i], ratio[i] = "—", "—"
		switch {
		case s.Pending != "":
			if i == 0 {
				felix[i] = "pending: " + s.Pending
			}
		case !slices.Contains(s.ran(), tr):
			if tr == transportTCP && s.NoTCP != "" {
				felix[i] = "n/a: " + s.NoTCP
			}
		default:
			felix[i] = cell(s.felixSummary(tr), s.Rounds, func(r Round) string { _, e := r.felix(tr); return e })
			if s.Peer != "" {
				ratio[i] = ratioCell(s.ratioSummary(tr))
			}
		}
	}
	if s.Pending == "" && s.Peer != "" {
		peer = cell(s.PeerSum, s.Rounds, func(r Round) string { return r.PeerErr })
	}
	out := append([]string{s.Workload, dash(s.Case), metric}, felix...)
	out = append(out, peerName, peer)
	return append(out, ratio...)
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// cell formats a summary, or the first error of that side (errOf) when it
// has none.
func cell(sum *Summary, rounds []Round, errOf func(Round) string) string {
	if sum == nil {
		for _, r := range rounds {
			if e := errOf(r); e != "" {
				return "failed: " + clip(e, 80)
			}
		}
		return "no figure"
	}
	if sum.N == 1 {
		return num(sum.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", num(sum.Median), num(sum.Min), num(sum.Max))
}

func ratioCell(sum *Summary) string {
	if sum == nil {
		return "—"
	}
	if sum.N == 1 {
		return fmt.Sprintf("%.2f", sum.Median)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", sum.Median, sum.Min, sum.Max)
}

// num prints a figure with about three significant digits, no exponent.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// clip shortens s to n runes and keeps it on one table line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "|", "/")), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

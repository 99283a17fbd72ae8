package main

import (
	"fmt"
	"math"
	"strings"
)

// renderTable prints every series as one markdown table row: each side's
// median and range over the rounds, and the median and range of the
// per-round Felix/peer ratios.
func renderTable(series []*Series) string {
	var b strings.Builder
	b.WriteString("| workload | case | metric | Felix median (min–max) | peer | peer median (min–max) | Felix/peer median (min–max) |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range series {
		metric := s.Metric
		if s.Unit != "" {
			metric += " (" + s.Unit + ")"
		}
		if s.Lower {
			metric += ", lower is better"
		}
		felix, peer, ratio := "—", "—", "—"
		peerName := s.Peer
		if peerName == "" {
			peerName = "—"
		}
		switch {
		case s.Pending != "":
			felix = "pending: " + s.Pending
		default:
			felix = cell(s.Felix, s.Rounds, true)
			if s.Peer != "" {
				peer = cell(s.PeerSum, s.Rounds, false)
				ratio = ratioCell(s.Ratio)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
			s.Workload, dash(s.Case), metric, felix, peerName, peer, ratio)
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// cell formats a summary, or the first error of that side when it has none.
func cell(sum *Summary, rounds []Round, felix bool) string {
	if sum == nil {
		for _, r := range rounds {
			e := r.PeerErr
			if felix {
				e = r.FelixErr
			}
			if e != "" {
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

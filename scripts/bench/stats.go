package main

import (
	"math"
	"slices"
)

// Round is one round's figure for Felix and for the peer; nil means that
// side produced no figure (see the matching error).
type Round struct {
	Felix    *float64 `json:"felix"`
	Peer     *float64 `json:"peer"`
	FelixErr string   `json:"felix_error,omitempty"`
	PeerErr  string   `json:"peer_error,omitempty"`
}

// Series is one metric of one workload case across the measured rounds.
type Series struct {
	Workload string   `json:"workload"`
	Case     string   `json:"case,omitempty"`
	Metric   string   `json:"metric"`
	Unit     string   `json:"unit"`
	Lower    bool     `json:"lower_is_better,omitempty"`
	Peer     string   `json:"peer,omitempty"` // "" when the workload has no peer
	Pending  string   `json:"pending,omitempty"`
	Note     string   `json:"note,omitempty"`
	Rounds   []Round  `json:"rounds"`
	Felix    *Summary `json:"felix_summary,omitempty"`
	PeerSum  *Summary `json:"peer_summary,omitempty"`
	Ratio    *Summary `json:"ratio_summary,omitempty"`
}

// Summary is the median and range of a set of figures.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// summarize returns nil for an empty set.
func summarize(vals []float64) *Summary {
	if len(vals) == 0 {
		return nil
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	return &Summary{N: len(s), Median: median(s), Min: s[0], Max: s[len(s)-1]}
}

// median of sorted values; the mean of the middle two for an even count.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// felixValues, peerValues and ratios collect the rounds that produced a
// figure. A ratio is taken only within a round where both sides produced
// one and the peer's is non-zero: round i's Felix over round i's peer.
func (s *Series) felixValues() []float64 {
	var v []float64
	for _, r := range s.Rounds {
		if r.Felix != nil {
			v = append(v, *r.Felix)
		}
	}
	return v
}

func (s *Series) peerValues() []float64 {
	var v []float64
	for _, r := range s.Rounds {
		if r.Peer != nil {
			v = append(v, *r.Peer)
		}
	}
	return v
}

func (s *Series) ratios() []float64 {
	var v []float64
	for _, r := range s.Rounds {
		if r.Felix != nil && r.Peer != nil && *r.Peer != 0 {
			v = append(v, *r.Felix / *r.Peer)
		}
	}
	return v
}

// summarizeAll fills the summaries from the rounds.
func (s *Series) summarizeAll() {
	s.Felix, s.PeerSum, s.Ratio = summarize(s.felixValues()), summarize(s.peerValues()), summarize(s.ratios())
}

// complete says whether the series produced what it promises: a Felix
// figure, and a peer figure when it has a peer. Pending series promise none.
func (s *Series) complete() bool {
	if s.Pending != "" {
		return true
	}
	if len(s.felixValues()) == 0 {
		return false
	}
	return s.Peer == "" || len(s.peerValues()) > 0
}

// percentile returns the q-quantile (0..1) of sorted values by the nearest
// rank: the smallest value with at least q of the samples at or below it.
func percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(q * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

package main

import (
	"math"
	"slices"
	"strings"
)

// Round is one round's figure for Felix over each transport and for the
// peer; nil means that side produced no figure (see the matching error) or
// did not run. Felix is the QUIC run (the only one in results from before
// the TCP transport, and the one of cases that have no TCP variant).
type Round struct {
	Felix       *float64 `json:"felix"`
	FelixTCP    *float64 `json:"felix_tcp,omitempty"`
	Peer        *float64 `json:"peer"`
	FelixErr    string   `json:"felix_error,omitempty"`
	FelixTCPErr string   `json:"felix_tcp_error,omitempty"`
	PeerErr     string   `json:"peer_error,omitempty"`
}

// felix is the round's figure and error over transport tr.
func (r *Round) felix(tr string) (*float64, string) {
	if tr == transportTCP {
		return r.FelixTCP, r.FelixTCPErr
	}
	return r.Felix, r.FelixErr
}

// setFelix records the round's figure or error over transport tr.
func (r *Round) setFelix(tr string, v *float64, err string) {
	if tr == transportTCP {
		r.FelixTCP, r.FelixTCPErr = v, err
		return
	}
	r.Felix, r.FelixErr = v, err
}

// Series is one metric of one workload case across the measured rounds.
type Series struct {
	Workload string `json:"workload"`
	Case     string `json:"case,omitempty"`
	Metric   string `json:"metric"`
	Unit     string `json:"unit"`
	Lower    bool   `json:"lower_is_better,omitempty"`
	Peer     string `json:"peer,omitempty"` // "" when the workload has no peer
	Pending  string `json:"pending,omitempty"`
	Note     string `json:"note,omitempty"`
	// Transports are the Felix transports this series ran over; empty in
	// results from before the TCP transport, which ran QUIC alone.
	Transports []string `json:"transports,omitempty"`
	// NoTCP says why the case has no TCP run ("" when it has one).
	NoTCP    string   `json:"no_tcp,omitempty"`
	Rounds   []Round  `json:"rounds"`
	Felix    *Summary `json:"felix_summary,omitempty"` // over QUIC
	FelixTCP *Summary `json:"felix_tcp_summary,omitempty"`
	PeerSum  *Summary `json:"peer_summary,omitempty"`
	Ratio    *Summary `json:"ratio_summary,omitempty"` // Felix over QUIC / peer
	RatioTCP *Summary `json:"ratio_tcp_summary,omitempty"`
}

// ran is the transports the series ran over.
func (s *Series) ran() []string {
	if len(s.Transports) == 0 {
		return []string{transportQUIC}
	}
	return s.Transports
}

// felixSummary and ratioSummary are the summaries over transport tr.
func (s *Series) felixSummary(tr string) *Summary {
	if tr == transportTCP {
		return s.FelixTCP
	}
	return s.Felix
}

func (s *Series) ratioSummary(tr string) *Summary {
	if tr == transportTCP {
		return s.RatioTCP
	}
	return s.Ratio
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
// one and the peer's is non-zero: round i's Felix over round i's peer, for
// each transport apart.
func (s *Series) felixValues(tr string) []float64 {
	var v []float64
	for _, r := range s.Rounds {
		if f, _ := r.felix(tr); f != nil {
			v = append(v, *f)
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

func (s *Series) ratios(tr string) []float64 {
	var v []float64
	for _, r := range s.Rounds {
		if f, _ := r.felix(tr); f != nil && r.Peer != nil && *r.Peer != 0 {
			v = append(v, *f / *r.Peer)
		}
	}
	return v
}

// summarizeAll fills the summaries from the rounds.
func (s *Series) summarizeAll() {
	s.Felix, s.Ratio = summarize(s.felixValues(transportQUIC)), summarize(s.ratios(transportQUIC))
	s.FelixTCP, s.RatioTCP = summarize(s.felixValues(transportTCP)), summarize(s.ratios(transportTCP))
	s.PeerSum = summarize(s.peerValues())
}

// complete says whether the series produced what it promises: a Felix
// figure over every transport it ran, and a peer figure when it has a
// peer. Pending series promise none.
func (s *Series) complete() bool {
	if s.Pending != "" {
		return true
	}
	for _, tr := range s.ran() {
		if len(s.felixValues(tr)) == 0 {
			return false
		}
	}
	return s.Peer == "" || len(s.peerValues()) > 0
}

// incomplete names what the series lacks, for the failure list.
func (s *Series) incomplete() string {
	var missing []string
	for _, tr := range s.ran() {
		if len(s.felixValues(tr)) == 0 {
			missing = append(missing, "felix "+tr)
		}
	}
	if s.Peer != "" && len(s.peerValues()) == 0 {
		missing = append(missing, "peer")
	}
	return strings.Join(missing, ", ")
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

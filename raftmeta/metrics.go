package raftmeta

import (
	"fmt"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/internal/metricdoc"
)

// raftHelp is the HELP text of a member's metric families.
var raftHelp = map[string]string{
	"felix_raft_term":                      "This member's current Raft term.",
	"felix_raft_commit_index":              "Index of the last Raft entry this member knows committed.",
	"felix_raft_applied_index":             "Index of the last Raft entry this member applied to its state machine.",
	"felix_raft_is_leader":                 "1 while this member leads its Raft group, 0 otherwise.",
	"felix_raft_proposals_total":           "Commands proposed through this member.",
	"felix_raft_proposal_failures_total":   "Proposals through this member that returned an error.",
	"felix_raft_snapshots_total":           "Snapshots this member took of its state machine.",
	"felix_raft_snapshots_installed_total": "Snapshots this member installed from its leader.",
	"felix_raft_messages_dropped_total":    "Raft messages to peers dropped (peer unreachable or its queue full).",
}

// nodeMetrics are one member's metrics, labelled member="<id>" and kept in
// their own set (registered globally while the node is open) so several
// members can live in one process.
type nodeMetrics struct {
	set                *metrics.Set
	term               *metrics.Gauge
	commit             *metrics.Gauge
	applied            *metrics.Gauge
	isLeader           *metrics.Gauge
	proposals          *metrics.Counter
	proposalFailures   *metrics.Counter
	snapshots          *metrics.Counter
	snapshotsInstalled *metrics.Counter
	messagesDropped    *metrics.Counter
}

func newNodeMetrics(n *Node) *nodeMetrics {
	metricdoc.Describe(raftHelp)
	s := metrics.NewSet()
	name := func(base string) string { return fmt.Sprintf(`%s{member="%d"}`, base, n.cfg.ID) }
	m := &nodeMetrics{
		set:                s,
		term:               s.NewGauge(name("felix_raft_term"), nil),
		commit:             s.NewGauge(name("felix_raft_commit_index"), nil),
		applied:            s.NewGauge(name("felix_raft_applied_index"), nil),
		isLeader:           s.NewGauge(name("felix_raft_is_leader"), nil),
		proposals:          s.NewCounter(name("felix_raft_proposals_total")),
		proposalFailures:   s.NewCounter(name("felix_raft_proposal_failures_total")),
		snapshots:          s.NewCounter(name("felix_raft_snapshots_total")),
		snapshotsInstalled: s.NewCounter(name("felix_raft_snapshots_installed_total")),
		messagesDropped:    s.NewCounter(name("felix_raft_messages_dropped_total")),
	}
	metrics.RegisterSet(s)
	return m
}

// observe publishes the node's indexes; callers hold n.mu.
func (m *nodeMetrics) observe(term, commit, applied uint64, leader bool) {
	m.term.Set(float64(term))
	m.commit.Set(float64(commit))
	m.applied.Set(float64(applied))
	if leader {
		m.isLeader.Set(1)
	} else {
		m.isLeader.Set(0)
	}
}

func (m *nodeMetrics) close() { metrics.UnregisterSet(m.set, true) }

package dev

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// felix dev's own variables, read from its environment and never passed
// to the nodes: per-node settings and the routes of the fault proxies the
// e2e tests put between nodes.
const devOwnPrefix = "FELIX_DEV_"

// nodeOverridePrefix starts felix dev's per-node settings:
// FELIX_DEV_NODE<i>_<NAME>=VALUE gives node i (1..N) FELIX_<NAME>=VALUE,
// after the settings every node gets, so it overrides them for that node
// and may name one node (FELIX_DEV_NODE2_NODE_PEER_ADVERTISE_ADDR). The
// e2e tests use it to put a fault proxy in front of a node's peer listener.
const nodeOverridePrefix = "FELIX_DEV_NODE"

// nodeOverrides collects the FELIX_DEV_NODE<i>_* variables of environ
// into each node's extra env (index i-1), and reports every one that
// names no node of count or no setting.
func nodeOverrides(environ []string, count int) ([][]string, error) {
	out := make([][]string, count)
	var errs []error
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(k, nodeOverridePrefix)
		if !ok {
			continue
		}
		num, name, _ := strings.Cut(rest, "_")
		i, err := strconv.Atoi(num)
		switch {
		case err != nil || i < 1 || i > count:
			errs = append(errs, fmt.Errorf("%s: want %s<i>_<NAME> with i in 1..%d (the nodes)", k, nodeOverridePrefix, count))
		case name == "":
			errs = append(errs, fmt.Errorf("%s: names no setting (%s%d_<NAME> sets FELIX_<NAME> on node%d)", k, nodeOverridePrefix, i, i))
		default:
			out[i-1] = append(out[i-1], "FELIX_"+name+"="+v)
		}
	}
	return out, errors.Join(errs...)
}

// raftViaPrefix names where the other nodes reach one node's Raft peer
// listener: FELIX_DEV_RAFT_VIA<j>=HOST:PORT puts http://HOST:PORT as
// member j's URL in every other node's --raft-peers (node j still listens
// on its own entry). The e2e tests put a fault proxy there to cut a node's
// control plane off from the others.
const raftViaPrefix = "FELIX_DEV_RAFT_VIA"

// raftVia collects the FELIX_DEV_RAFT_VIA<j> variables of environ by node
// index (j-1), and reports every one that names no node of count or no
// address.
func raftVia(environ []string, count int) (map[int]string, error) {
	out := map[int]string{}
	var errs []error
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		num, ok := strings.CutPrefix(k, raftViaPrefix)
		if !ok {
			continue
		}
		j, err := strconv.Atoi(num)
		switch {
		case err != nil || j < 1 || j > count:
			errs = append(errs, fmt.Errorf("%s: want %s<j> with j in 1..%d (the nodes)", k, raftViaPrefix, count))
		case v == "" || strings.Contains(v, "/"):
			errs = append(errs, fmt.Errorf("%s=%q: want HOST:PORT", k, v))
		default:
			out[j-1] = v
		}
	}
	return out, errors.Join(errs...)
}

// applyRaftVia rewrites each node's --raft-peers so that every member
// with a via address is reached through it by the other nodes. Each
// node's own entry stays its listener.
func applyRaftVia(p *plan, via map[int]string) {
	if len(via) == 0 {
		return
	}
	for i := range p.nodes {
		n := &p.nodes[i]
		var peers []string
		for j, m := range p.nodes {
			url := m.RaftPeerURL
			if addr, ok := via[j]; ok && j != i {
				url = "http://" + addr
			}
			peers = append(peers, fmt.Sprintf("%d=%s", m.RaftID, url))
		}
		argv := append([]string(nil), n.Argv...)
		for k := 0; k+1 < len(argv); k++ {
			if argv[k] == "--raft-peers" {
				argv[k+1] = strings.Join(peers, ",")
			}
		}
		n.Argv = argv
	}
}

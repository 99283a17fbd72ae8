package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/felixmq/felix"

// allowed lists, for each package prefix of ours, the prefixes of ours it
// may import (DESIGN.md's package map). Sub-packages inherit their
// parent's row unless they have one of their own.
var allowed = map[string][]string{
	"wire":                   {},
	"log":                    {},
	"core/auth":              {"wire"},
	"core/cachelog":          {"log"}, // the cache's file formats and their read-only inspection: a leaf core and the CLI share
	"core":                   {"wire", "log", "core/auth", "internal/atomicfile", "internal/metricdoc"},
	"raftmeta":               {"wire", "internal/metricdoc"},
	"raftmeta/fsm":           {},                       // the state machine contract: a leaf
	"raftmeta/catalog":       {"wire", "raftmeta/fsm"}, // no Raft node, transport or raft log
	"roles/broker":           {"core", "core/auth", "log", "wire", "roles/broker", "internal/metricdoc", "internal/gogroup", "transport"},
	"roles/controlplane":     {"raftmeta", "core/auth", "wire", "roles/controlplane", "internal/metricdoc"},
	"roles/cli":              {"sdk/felix", "wire", "log", "core/cachelog", "roles/cli", "internal/buildinfo"},
	"roles/dev":              {"roles", "core", "sdk/felix", "wire", "log", "raftmeta", "internal/atomicfile", "internal/freeport"},
	"roles/serve":            {"roles", "core", "wire", "log", "raftmeta", "sdk/felix", "internal/atomicfile"},
	"sdk/felix":              {"wire", "sdk/felix", "internal/metricdoc", "transport"},
	"e2e":                    {"sdk/felix", "wire", "e2e"},
	"":                       {"roles/serve", "internal/buildinfo"}, // main
	"internal/testenv":       {},
	"internal/transporttest": {"transport"}, // runs a package's tests once per transport (tests only)
	"internal/testcert":      {},            // self-signed TLS for transport tests (tests only)
	"internal/faultfs":       {"log"},       // imported by tests only
	"internal/atomicfile":    {},            // crash-safe small-file writes, a leaf
	"internal/metricdoc":     {},            // HELP text for every metric family: a leaf
	"internal/authtest":      {},            // the expiry cases every side is tested with (tests only)
	"internal/buildinfo":     {},            // what the binary was built from: a leaf
	"internal/gogroup":       {},            // goroutines an owner waits for at shutdown: a leaf
	"internal/freeport":      {},            // loopback ports below the ephemeral range: a leaf
	"roles/broker/sched":     {"core"},
	"roles/broker/tlsconf":   {"internal/atomicfile"},

	"roles/controlplane/placement": {"wire"}, // pure placement decisions: a leaf

	"transport": {"wire", "transport"}, // the interface and its implementations
}

// quicModule is quic-go. Only quicOwners may import it or any of its
// sub-packages, in their code or their tests: everything else reaches
// QUIC through the transport interface (DESIGN.md's transport/), which a
// package that dialed QUIC itself would bypass.
const quicModule = "github.com/quic-go/quic-go"

// quicOwners are the packages that may import quic-go: transport/quictr,
// the quic-go implementation of the transport interface, and the bench's
// raw QUIC client (roles/cli/bench/quicraw.go, a baseline that measures
// quic-go without our wrappers). The match is exact: a sub-package of an
// owner is not an owner. Every owner that exists must still import
// quic-go, so the list cannot grow stale.
var quicOwners = map[string]bool{
	"roles/cli/bench":  true,
	"transport/quictr": true, // the quic-go implementation of transport/
}

// quicRuleViolations returns one message per import of quic-go by rel
// (a package path relative to the module) that quicOwners does not allow.
func quicRuleViolations(rel string, imports []string) []string {
	if quicOwners[rel] {
		return nil
	}
	var out []string
	for _, imp := range imports {
		if isQUIC(imp) {
			out = append(out, fmt.Sprintf("%s imports %s, but only the packages that own the QUIC transport (deps_test.go quicOwners) may import quic-go; go through them", rel, imp))
		}
	}
	return out
}

// isQUIC reports whether imp is quic-go or one of its sub-packages.
func isQUIC(imp string) bool {
	return imp == quicModule || strings.HasPrefix(imp, quicModule+"/")
}

func rowFor(rel string) (string, bool) {
	best, found := "", false
	for k := range allowed {
		if (rel == k || strings.HasPrefix(rel, k+"/")) && (!found || len(k) > len(best)) {
			best, found = k, true
		}
	}
	return best, found
}

func TestPackageImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen, quicUsers := map[string]bool{}, map[string]bool{}
	for {
		var p struct {
			ImportPath   string
			Imports      []string
			TestImports  []string
			XTestImports []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		all := slices.Concat(p.Imports, p.TestImports, p.XTestImports)
		for _, msg := range quicRuleViolations(rel, all) {
			t.Error(msg)
		}
		seen[rel], quicUsers[rel] = true, slices.ContainsFunc(all, isQUIC)
		row, ok := rowFor(rel)
		if !ok {
			t.Errorf("package %q has no row in the import map; add one (DESIGN.md)", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if imp == "log" {
				t.Errorf("%s imports the standard library's log; use log/slog", p.ImportPath)
			}
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			irel := strings.TrimPrefix(imp, module+"/")
			if !importAllowed(rel, irel, allowed[row]) {
				t.Errorf("%s imports %s, which DESIGN.md's map does not allow", rel, irel)
			}
		}
	}
	for owner := range quicOwners {
		if seen[owner] && !quicUsers[owner] {
			t.Errorf("%s no longer imports quic-go; remove it from quicOwners so it cannot start again", owner)
		}
	}
}

// TestQUICRuleNamesOffender checks the quic-go rule itself: a package
// outside quicOwners importing quic-go or a sub-package fails with a
// message naming the rule, and an owner does not.
func TestQUICRuleNamesOffender(t *testing.T) {
	msgs := quicRuleViolations("roles/newthing", []string{"context", quicModule + "/http3", "github.com/quic-go/quic-go-lookalike", quicModule})
	if len(msgs) != 2 {
		t.Fatalf("got %d violations %q, want 2 (quic-go and its http3)", len(msgs), msgs)
	}
	for _, m := range msgs {
		if !strings.Contains(m, "roles/newthing") || !strings.Contains(m, "only the packages that own the QUIC transport") || !strings.Contains(m, "quicOwners") {
			t.Errorf("message %q does not name the package and the rule", m)
		}
	}
	if msgs := quicRuleViolations("transport/quictr", []string{quicModule}); len(msgs) != 0 {
		t.Errorf("an owner was refused: %q", msgs)
	}
	if msgs := quicRuleViolations("sdk/felix", []string{quicModule}); len(msgs) != 1 {
		t.Errorf("a former owner was allowed: %q", msgs)
	}
	if msgs := quicRuleViolations("transport/quictr/internal", []string{quicModule}); len(msgs) != 1 {
		t.Errorf("a sub-package of an owner was allowed: %q", msgs)
	}
}

func importAllowed(from, imp string, prefixes []string) bool {
	if strings.HasPrefix(imp, from+"/") { // own sub-package
		return true
	}
	for _, p := range prefixes {
		if imp == p || strings.HasPrefix(imp, p+"/") {
			// core may import core/auth but nothing else below core is special.
			return true
		}
	}
	return false
}

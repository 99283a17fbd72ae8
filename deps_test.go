package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/felixmq/felix"

// allowed lists, for each package prefix of ours, the prefixes of ours it
// may import (DESIGN.md's package map). Sub-packages inherit their
// parent's row unless they have one of their own.
var allowed = map[string][]string{
	"wire":                 {},
	"log":                  {},
	"core/auth":            {"wire"},
	"core":                 {"wire", "log", "core/auth"},
	"raftmeta":             {"wire"},
	"raftmeta/fsm":         {},                       // the state machine contract: a leaf
	"raftmeta/catalog":     {"wire", "raftmeta/fsm"}, // no Raft node, transport or raft log
	"roles/broker":         {"core", "core/auth", "log", "wire", "roles/broker"},
	"roles/controlplane":   {"raftmeta", "core/auth", "wire", "roles/controlplane"},
	"roles/cli":            {"sdk/felix", "wire", "log", "roles/cli"},
	"roles/dev":            {"roles", "core", "sdk/felix", "wire", "log", "raftmeta"},
	"roles/serve":          {"roles", "core", "wire", "log", "raftmeta", "sdk/felix"},
	"sdk/felix":            {"wire", "sdk/felix"},
	"e2e":                  {"sdk/felix", "wire", "e2e"},
	"":                     {"roles/serve"}, // main
	"internal/testenv":     {},
	"roles/broker/sched":   {"core"},
	"roles/broker/tlsconf": {},
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
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
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

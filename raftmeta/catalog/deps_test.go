package catalog

import (
	"os/exec"
	"strings"
	"testing"
)

// The state machine must not depend on the Raft node, its transport or
// its log, directly or through another package: the root deps test checks
// our own import edges, this one every dependency.
func TestImportsNoRaftCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, "go.etcd.io/raft"),
			dep == "github.com/felixmq/felix/raftmeta",
			strings.HasPrefix(dep, "github.com/felixmq/felix/raftmeta/") &&
				dep != "github.com/felixmq/felix/raftmeta/fsm" &&
				dep != "github.com/felixmq/felix/raftmeta/catalog":
			t.Errorf("the catalog state machine depends on %s", dep)
		}
	}
}

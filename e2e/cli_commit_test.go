package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The commit, state and idempotent publishing commands through the binary
// on felix serve: felix commit prints the record's offset and felix state
// get prints that offset as the key's version; a commit with a stale
// --if-offset exits 3 naming the tail and writes nothing; felix pub
// --idempotent writes each message once, at the offset it printed.
func TestCLICommitStateAndIdempotentPub(t *testing.T) {
	n := startServeIn(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "orders", "--durable")
	c := n.connect(ctx, n.adminToken())
	eventually(t, 15*time.Second, "the durable stream to reach the broker", func() bool {
		_, err := c.Read(ctx, "default", "orders", 0, 0, nil, 1)
		return err == nil
	})

	out := n.mustFelix(ctx, "commit", "orders", "order-1", "--event", "placed", "--put", "status=placed", "--put", "total=42")
	var off uint64
	if _, err := fmt.Sscanf(out, "offset %d\n", &off); err != nil {
		t.Fatalf("felix commit printed %q: %v", out, err)
	}
	if out := n.mustFelix(ctx, "state", "get", "orders", "order-1", "status"); out != fmt.Sprintf("%d\nplaced\n", off) {
		t.Fatalf("felix state get status: %q, want version %d and placed", out, off)
	}
	var doc struct {
		Found   bool   `json:"found"`
		Value   string `json:"value"`
		Version uint64 `json:"version"`
	}
	js := n.mustFelix(ctx, "state", "get", "orders", "order-1", "total", "-o", "json")
	if err := json.Unmarshal([]byte(js), &doc); err != nil || !doc.Found || doc.Value != "42" || doc.Version != off {
		t.Fatalf("felix state get total -o json: %q (%v)", js, err)
	}

	// A stale --if-offset: exit 3 with the tail, nothing written.
	_, errOut, code := n.felix(ctx, "commit", "orders", "order-1", "--event", "late", "--put", "status=late", "--if-offset", fmt.Sprint(off))
	if code != 3 || !strings.Contains(errOut, fmt.Sprintf("at offset %d", off+1)) {
		t.Fatalf("felix commit --if-offset %d: exit %d stderr %q", off, code, errOut)
	}
	if recs := readAll(ctx, t, c, "orders", 0); len(recs) != int(off)+1 {
		t.Fatalf("after a refused commit the stream holds %d records, want %d", len(recs), off+1)
	}
	if out := n.mustFelix(ctx, "state", "get", "orders", "order-1", "status"); out != fmt.Sprintf("%d\nplaced\n", off) {
		t.Fatalf("after a refused commit felix state get: %q", out)
	}

	// The right --if-offset is written; a delete makes the key not found.
	if out := n.mustFelix(ctx, "commit", "orders", "order-1", "--event", "shipped", "--delete", "total", "--if-offset", fmt.Sprint(off+1)); out != fmt.Sprintf("offset %d\n", off+1) {
		t.Fatalf("felix commit --if-offset %d: %q", off+1, out)
	}
	if _, errOut, code := n.felix(ctx, "state", "get", "orders", "order-1", "total"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("felix state get of a deleted key: exit %d stderr %q", code, errOut)
	}

	// pub --idempotent: each message once, at the offset printed.
	base := off + 2
	out = n.mustFelix(ctx, "pub", "orders", "a", "b", "c", "--idempotent")
	if want := fmt.Sprintf("offset %d\noffset %d\noffset %d\n", base, base+1, base+2); out != want {
		t.Fatalf("felix pub --idempotent: %q, want %q", out, want)
	}
	recs := readAll(ctx, t, c, "orders", 0)
	if len(recs) != int(base)+3 {
		t.Fatalf("after felix pub --idempotent the stream holds %d records, want %d", len(recs), base+3)
	}
	// With --stdin each line is one message.
	cmd := exec.CommandContext(ctx, felixBin, "pub", "orders", "--stdin", "--idempotent")
	cmd.Dir, cmd.Stdin = n.dir, strings.NewReader("d\ne\n")
	stdout, err := cmd.Output()
	if want := fmt.Sprintf("offset %d\noffset %d\n", base+3, base+4); err != nil || string(stdout) != want {
		t.Fatalf("felix pub --stdin --idempotent: %q %v, want %q", stdout, err, want)
	}
	recs = readAll(ctx, t, c, "orders", 0)
	if len(recs) != int(base)+5 {
		t.Fatalf("after felix pub --stdin --idempotent the stream holds %d records, want %d", len(recs), base+5)
	}
	for i, m := range []string{"a", "b", "c", "d", "e"} {
		if r := recs[int(base)+i]; string(r.Payload) != m || r.Offset != base+uint64(i) {
			t.Fatalf("record %d: %q at %d, want %q", int(base)+i, r.Payload, r.Offset, m)
		}
	}
}

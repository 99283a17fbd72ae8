package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/wire"
)

// A member stopped while thousands of entries are written and compacted
// away comes back, catches up from a snapshot of the catalog, and ends
// with a byte-identical state.
func TestRaftStoreSnapshotInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("writes thousands of entries")
	}
	g := openTestGroup(t, 3, withSnapshotEvery(200))
	seedNamespace(t, g.stores[1], "acme", "prod")
	g.stop(3)

	const n, workers = 2000, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := g.stores[uint64(w%2+1)]
			for i := w; i < n; i += workers {
				if err := createRetrying(s, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: fmt.Sprintf("s%04d", i), Shards: 1}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	g.restart(3)
	list, err := g.stores[3].Streams(bg, "acme", "prod") // waits for the catch-up
	must(t, err)
	if len(list) != n {
		t.Fatalf("member 3 has %d streams after catching up, want %d", len(list), n)
	}
	if installed := snapshotsInstalled(3); installed < 1 {
		t.Fatalf("member 3 installed %v snapshots, want at least one", installed)
	}
	assertSameCatalogs(t, g)
}

// assertSameCatalogs quiesces a three-member group (a barrier on every
// member) and compares the state machines byte for byte.
func assertSameCatalogs(t *testing.T, g *testGroup) {
	t.Helper()
	for id := uint64(1); id <= 3; id++ {
		_, _, err := g.stores[id].Meta(bg, "x")
		must(t, err)
	}
	waitFor(t, "identical applied indexes", func() bool {
		a := g.stores[1].Catalog().AppliedIndex()
		return a == g.stores[2].Catalog().AppliedIndex() && a == g.stores[3].Catalog().AppliedIndex()
	})
	want := catalogBytes(t, g.stores[1])
	for id := uint64(2); id <= 3; id++ {
		if !bytes.Equal(catalogBytes(t, g.stores[id]), want) {
			t.Fatalf("member %d's catalog differs from member 1's", id)
		}
	}
}

func catalogBytes(t *testing.T, s *RaftStore) []byte {
	t.Helper()
	rc, _, err := s.Catalog().Snapshot()
	must(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	must(t, err)
	return b
}

var installedLine = regexp.MustCompile(`felix_raft_snapshots_installed_total\{member="(\d+)"\} (\d+)`)

func snapshotsInstalled(member int) int {
	var buf bytes.Buffer
	metrics.WritePrometheus(&buf, false)
	for _, m := range installedLine.FindAllStringSubmatch(buf.String(), -1) {
		if m[1] == strconv.Itoa(member) {
			v, _ := strconv.Atoi(m[2])
			return v
		}
	}
	return 0
}

// A member whose catalog file is discarded at start (the machine went down
// while it was open, so its unsynced pages cannot be trusted) rebuilds it
// from the raft snapshot and the entries after it, and ends with the same
// state as the others.
func TestRaftStoreRebuildsADiscardedCatalog(t *testing.T) {
	g := openTestGroup(t, 3, withSnapshotEvery(100))
	seedNamespace(t, g.stores[1], "acme", "prod")
	for i := range 250 { // two snapshots and a tail after them
		must(t, g.stores[uint64(i%3+1)].CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: fmt.Sprintf("s%03d", i), Shards: 1}))
	}
	g.stop(2)
	// What a member finds after the machine lost power with the catalog
	// open: a marker naming another boot.
	marker := filepath.Join(g.dirs[2], "catalog.db.open")
	if err := os.WriteFile(marker, []byte("a-previous-boot"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.restart(2)
	list, err := g.stores[2].Streams(bg, "acme", "prod")
	must(t, err)
	if len(list) != 250 {
		t.Fatalf("member 2 has %d streams after rebuilding its catalog, want 250", len(list))
	}
	assertSameCatalogs(t, g)
}

// createRetrying creates spec, asking again while the group has no leader
// to take it (a two-member group on a loaded machine may lose its leader
// for an election); a create that landed before its answer was lost is
// then found existing.
func createRetrying(s *RaftStore, spec wire.StreamSpec) error {
	for attempt := 0; ; attempt++ {
		err := s.CreateStream(bg, spec)
		var we *wire.Error
		switch {
		case err == nil:
			return nil
		case attempt > 0 && errors.Is(err, ErrConflict):
			return nil
		case attempt < 5 && errors.As(err, &we) && we.Code == wire.CodeShardUnavailable:
			time.Sleep(200 * time.Millisecond)
			continue
		}
		return err
	}
}

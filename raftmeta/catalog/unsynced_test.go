package catalog

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/felixmq/felix/wire"
)

// withBootID points the boot id at a file holding id for the test.
func withBootID(t *testing.T, id string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := bootIDPath
	bootIDPath = p
	t.Cleanup(func() { bootIDPath = old })
}

func openUnsynced(t *testing.T, path string) *Catalog {
	t.Helper()
	c, err := OpenCatalog(path, CatalogUnsynced(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeTenant(t *testing.T, c *Catalog, index uint64, id string) {
	t.Helper()
	if _, err := c.Apply(index, CmdWrite(wire.KindTenants, ModeCreate, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: id}})); err != nil {
		t.Fatal(err)
	}
}

// The marker beside an unsynced catalog decides at open whether the file
// can be trusted: a clean close or a process that died in this boot keeps
// it; a machine restart or a failed sync discards it for a rebuild.
func TestUnsyncedCatalogMarker(t *testing.T) {
	cases := []struct {
		name     string
		marker   string // "" for none
		boot     string
		keepFile bool
	}{
		{"closed cleanly", "", "boot-a", true},
		{"process died, same boot", "boot-a", "boot-a", true},
		{"machine restarted", "boot-a", "boot-b", false},
		{"a sync failed", markerUntrusted, "boot-a", false},
		{"no boot id on this system", markerUntrusted, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withBootID(t, "boot-a")
			path := filepath.Join(t.TempDir(), "catalog.db")
			c := openUnsynced(t, path)
			writeTenant(t, c, 1, "acme")
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path + unsyncedMarkerSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("marker after a clean close: %v", err)
			}
			if tc.marker != "" {
				if err := os.WriteFile(path+unsyncedMarkerSuffix, []byte(tc.marker), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.boot == "" {
				bootIDPath = filepath.Join(t.TempDir(), "missing")
			} else {
				withBootID(t, tc.boot)
			}
			c = openUnsynced(t, path)
			defer c.Close()
			want := uint64(0)
			if tc.keepFile {
				want = 1
			}
			if got := c.AppliedIndex(); got != want {
				t.Fatalf("applied index after reopening: %d, want %d", got, want)
			}
			marker, err := os.ReadFile(path + unsyncedMarkerSuffix)
			if err != nil {
				t.Fatalf("no marker while open: %v", err)
			}
			wantMarker := tc.boot
			if wantMarker == "" {
				wantMarker = markerUntrusted
			}
			if string(marker) != wantMarker {
				t.Fatalf("marker %q while open, want %q", marker, wantMarker)
			}
		})
	}
}

package broker

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// bootIs is a boot id source answering id (none when id is "").
func bootIs(id string) func() (string, bool) {
	return func() (string, bool) { return id, id != "" }
}

// startWith opens the storage identity of dir under fsync and boot,
// failing t on an error.
func startWith(t *testing.T, dir, fsync string, boot func() (string, bool)) storageIdentity {
	t.Helper()
	si, err := openStorageIdentity(dir, fsync, boot)
	if err != nil {
		t.Fatal(err)
	}
	return si
}

// writeMarker leaves the marker a run under fsync in boot left behind.
func writeMarker(t *testing.T, dir, boot, fsync string) {
	t.Helper()
	if _, err := writeRunMarker(dir, runMarker{BootID: boot, Fsync: fsync}); err != nil {
		t.Fatal(err)
	}
}

func TestTheRunMarkerIsWrittenAtStartAndRemovedAtACleanStop(t *testing.T) {
	dir := t.TempDir()
	si := startWith(t, dir, "periodic", bootIs("boot-1"))
	if si.ID == "" || si.Crashed != "" || si.marker != filepath.Join(dir, runMarkerFile) {
		t.Fatalf("first start %+v", si)
	}
	b, err := os.ReadFile(si.marker)
	if err != nil {
		t.Fatal(err)
	}
	var m runMarker
	if err := json.Unmarshal(b, &m); err != nil || m.BootID != "boot-1" || m.Fsync != "periodic" || m.PID != os.Getpid() {
		t.Fatalf("marker %q: %+v %v", b, m, err)
	}
	if err := removeRunMarker(si.marker); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(si.marker); !os.IsNotExist(err) {
		t.Fatalf("marker still there: %v", err)
	}
	// A clean stop, then a reboot: the identity stays.
	if again := startWith(t, dir, "periodic", bootIs("boot-2")); again.ID != si.ID || again.Crashed != "" {
		t.Fatalf("after a clean stop and a reboot %+v, was %+v", again, si)
	}
	// A marker without a storage.id (a directory half removed by hand):
	// a new identity, naming none.
	mustNil(t, os.Remove(filepath.Join(dir, storageIDFile)))
	writeMarker(t, dir, "boot-1", "periodic")
	if fresh := startWith(t, dir, "periodic", bootIs("boot-2")); fresh.ID == si.ID || fresh.Crashed != "" {
		t.Fatalf("without a storage.id %+v", fresh)
	}
	// Without a directory: a new identity every time, no marker.
	if none := startWith(t, "", "periodic", bootIs("boot-2")); none.ID == "" || none.marker != "" || none.Crashed != "" {
		t.Fatalf("without a directory %+v", none)
	}
}

func TestAStorageIdentityIsReplacedOnlyAfterAMachineCrashThatMayHaveLostATail(t *testing.T) {
	cases := []struct {
		name        string
		markerBoot  string // "" with marker false: no marker
		marker      bool
		torn        bool
		fsync, boot string
		replaced    bool
	}{
		{name: "clean stop", fsync: "periodic", boot: "boot-2"},
		{name: "process killed in the same boot", marker: true, markerBoot: "boot-1", fsync: "periodic", boot: "boot-1"},
		{name: "machine crash under periodic", marker: true, markerBoot: "boot-1", fsync: "periodic", boot: "boot-2", replaced: true},
		{name: "machine crash under none", marker: true, markerBoot: "boot-1", fsync: "none", boot: "boot-2", replaced: true},
		{name: "machine crash under always", marker: true, markerBoot: "boot-1", fsync: "always", boot: "boot-2"},
		{name: "no boot id to read", marker: true, markerBoot: "boot-1", fsync: "periodic", boot: "", replaced: true},
		{name: "no boot id, under always", marker: true, markerBoot: "", fsync: "always", boot: ""},
		{name: "torn marker", marker: true, torn: true, boot: "boot-1", replaced: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			first := startWith(t, dir, "periodic", bootIs("boot-1"))
			if err := removeRunMarker(first.marker); err != nil {
				t.Fatal(err)
			}
			switch {
			case c.torn:
				if err := os.WriteFile(filepath.Join(dir, runMarkerFile), []byte(`{"boot_i`), 0o600); err != nil {
					t.Fatal(err)
				}
			case c.marker:
				writeMarker(t, dir, c.markerBoot, c.fsync)
			}
			si := startWith(t, dir, "periodic", bootIs(c.boot))
			switch {
			case c.replaced && (si.ID == first.ID || si.Crashed != first.ID || si.Why == ""):
				t.Fatalf("not replaced: %+v, was %s", si, first.ID)
			case !c.replaced && (si.ID != first.ID || si.Crashed != ""):
				t.Fatalf("replaced: %+v, was %s", si, first.ID)
			}
			// The identity on disk is the one started under, and the next
			// start in the same boot keeps it, naming what this one named
			// (no registration reached a control plane). With no boot id
			// it counts as a crash: the marker is still there.
			next := startWith(t, dir, "periodic", bootIs(c.boot))
			switch {
			case c.boot != "" && (next.ID != si.ID || next.Crashed != si.Crashed):
				t.Fatalf("next start in the same boot %+v, want %s kept naming %q", next, si.ID, si.Crashed)
			case c.boot == "" && (next.ID == si.ID || next.Crashed != cmp.Or(si.Crashed, si.ID)):
				t.Fatalf("next start without a boot id %+v, want %s replaced", next, si.ID)
			}
		})
	}
}

// A run that replaced its identity after a crash and went down again
// before the control plane heard of the new one leaves the next start
// naming the identity the control plane knows.
func TestACrashedIdentityIsNamedUntilTheControlPlaneHeardOfIt(t *testing.T) {
	dir := t.TempDir()
	a := startWith(t, dir, "periodic", bootIs("boot-1")) // killed with its machine
	b := startWith(t, dir, "periodic", bootIs("boot-2")) // crashed again before registering
	if b.Crashed != a.ID {
		t.Fatalf("first crash %+v, want %s named", b, a.ID)
	}
	c := startWith(t, dir, "periodic", bootIs("boot-3"))
	if c.ID == b.ID || c.Crashed != a.ID {
		t.Fatalf("second crash before registering %+v, want a new identity naming %s (not %s)", c, a.ID, b.ID)
	}
	// Its process alone killed before registering: the identity stays,
	// and it still names a.
	c2 := startWith(t, dir, "periodic", bootIs("boot-3"))
	if c2.ID != c.ID || c2.Crashed != a.ID || c2.Why == "" {
		t.Fatalf("process kill before registering %+v, want %s naming %s", c2, c.ID, a.ID)
	}
	// Registered: the control plane keeps the crash on the record, so a
	// start after a process kill names none, and one after another crash
	// names the identity it registered.
	mustNil(t, c2.registered())
	if c3 := startWith(t, dir, "periodic", bootIs("boot-3")); c3.ID != c.ID || c3.Crashed != "" {
		t.Fatalf("process kill after registering %+v", c3)
	}
	if d := startWith(t, dir, "periodic", bootIs("boot-4")); d.ID == c.ID || d.Crashed != c.ID {
		t.Fatalf("crash after registering %+v, want a new identity naming %s", d, c.ID)
	}
}

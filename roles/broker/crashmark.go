package broker

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// The run marker: how a broker tells, at start, that the machine under
// its durable storage crashed while it ran (docs/storage.md, "The run
// marker").
//
//  1. While the broker runs, runMarkerFile in the storage directory says
//     so, with the machine's boot id and the fsync policy the broker runs
//     under. It is written and fsynced at start, before the broker
//     registers, and removed at a clean shutdown once every log is closed.
//  2. At start, a marker left over means the last run did not stop
//     cleanly. If its boot id differs from this boot's (or this OS has no
//     boot id to read) the machine went down with the broker, and if the
//     last run's policy was not "always" the logs may have lost their
//     unsynced tails: the broker takes a new storage identity and tells
//     the control plane the one it replaced (crashed_storage_id), so the
//     shards it led fail over instead of reopening a shorter log.
//  3. A marker with this boot's id means the process alone was killed:
//     the OS kept every write it accepted, so nothing was lost and the
//     identity stays (#1367).

// runMarkerFile is the run marker's name in the durable storage directory.
const runMarkerFile = "broker.running"

// bootIDPath is where Linux keeps the boot id: random, new at every boot.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// runMarker is the run marker's content (JSON).
type runMarker struct {
	// BootID is the machine's boot id when the run started; "" when the
	// OS has none to read.
	BootID string `json:"boot_id"`
	// Fsync is the fsync policy the run used (FELIX_DURABLE_FSYNC).
	Fsync string `json:"fsync"`
	// PID is the process id of the run, for an operator's eyes only.
	PID int `json:"pid,omitempty"`
	// CrashedStorageID is the identity the run names as replaced after a
	// crash in its registrations ("" when none), and Registered is set once
	// the control plane accepted one: a run that crashes again before that
	// left the control plane knowing only the identity named here, so the
	// next start names it again rather than one the control plane never
	// heard of.
	CrashedStorageID string `json:"crashed_storage_id,omitempty"`
	Registered       bool   `json:"registered,omitempty"`
}

// readBootID reads this boot's id; ok is false when the OS has none.
func readBootID() (string, bool) {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return "", false
	}
	id := strings.TrimSpace(string(b))
	return id, id != ""
}

// storageIdentity is what a broker with durable storage starts under.
type storageIdentity struct {
	// ID is the storage identity it registers with.
	ID string
	// Crashed is the identity it replaced at this start because the
	// machine crashed under a policy that may lose unsynced tails; "" when
	// it kept its identity.
	Crashed string
	// Why says why it was replaced (for the log).
	Why string
	// marker is the run marker's path, removed at a clean shutdown ("" when
	// none was written), and run its content.
	marker string
	run    runMarker
}

// crashLostTail decides, from the marker a run left (nil: none, the run
// stopped cleanly), this boot's id (ok false: none to read), whether
// the unsynced tails of that run's logs may be lost, and why.
func crashLostTail(m *runMarker, bootID string, bootOK bool) (bool, string) {
	switch {
	case m == nil:
		return false, ""
	case m.Fsync == "always":
		return false, ""
	case !bootOK:
		return true, "the last run did not stop cleanly and this OS has no boot id to tell a process kill from a machine crash"
	case m.BootID != bootID:
		return true, fmt.Sprintf("the last run did not stop cleanly and the machine rebooted since (boot id %s, now %s)", m.BootID, bootID)
	}
	return false, ""
}

// openStorageIdentity loads the storage identity kept in dir (see
// loadStorageID), replaces it when the last run's machine crashed under
// fsync policy other than "always" (crashLostTail), then writes the run
// marker for this run under fsync policy fsync. bootID reads this boot's
// id. Without a directory the identity is new and no marker is written.
func openStorageIdentity(dir, fsync string, bootID func() (string, bool)) (storageIdentity, error) {
	if dir == "" {
		return storageIdentity{ID: newStorageID()}, nil
	}
	prev, err := readRunMarker(dir)
	if err != nil {
		return storageIdentity{}, err
	}
	if _, err := os.Stat(filepath.Join(dir, storageIDFile)); errors.Is(err, fs.ErrNotExist) {
		prev = nil // a new identity follows anyway: no old one to name
	}
	id, err := loadStorageID(dir)
	if err != nil {
		return storageIdentity{}, err
	}
	out := storageIdentity{ID: id}
	// An identity replaced by a run the control plane never heard from is
	// still the one it knows this broker's copies by.
	unheard := ""
	if prev != nil && !prev.Registered {
		unheard = prev.CrashedStorageID
	}
	boot, bootOK := bootID()
	lost, why := crashLostTail(prev, boot, bootOK)
	switch {
	case lost:
		if out.ID, err = replaceStorageID(dir); err != nil {
			return storageIdentity{}, err
		}
		out.Crashed, out.Why = cmp.Or(unheard, id), why
	case unheard != "":
		out.Crashed, out.Why = unheard, "the last run replaced it after a crash and stopped before the control plane heard of it"
	}
	out.run = runMarker{BootID: boot, Fsync: fsync, PID: os.Getpid(), CrashedStorageID: out.Crashed}
	if out.marker, err = writeRunMarker(dir, out.run); err != nil {
		return storageIdentity{}, err
	}
	return out, nil
}

// registered records in the run marker that the control plane accepted a
// registration naming si.Crashed (nothing to record when it names none).
func (si *storageIdentity) registered() error {
	if si.marker == "" || si.Crashed == "" || si.run.Registered {
		return nil
	}
	si.run.Registered = true
	_, err := writeRunMarker(filepath.Dir(si.marker), si.run)
	return err
}

// logCrashed logs, at start, a storage identity replaced after a crash.
func (si storageIdentity) logCrashed(log *slog.Logger) {
	if si.Crashed == "" {
		return
	}
	log.Warn("this broker's machine crashed while it ran, so its logs may have lost their unsynced tails: "+
		"it starts under a new storage identity; the shards it led fail over to a follower holding more, "+
		"or are named to it again once placement has checked, and its follower copies are copied afresh",
		"why", si.Why, "storage_id", si.ID, "crashed_storage_id", si.Crashed)
}

// readRunMarker reads the run marker dir holds: nil when there is none.
// A marker that does not parse (a torn write) counts as a run that did
// not stop cleanly, under an unknown policy and boot.
func readRunMarker(dir string) (*runMarker, error) {
	b, err := os.ReadFile(filepath.Join(dir, runMarkerFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("run marker: %w", err)
	}
	var m runMarker
	if json.Unmarshal(b, &m) != nil {
		return &runMarker{}, nil
	}
	return &m, nil
}

// writeRunMarker writes m as dir's run marker, durably (the file, then
// the directory), and returns its path.
func writeRunMarker(dir string, m runMarker) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, runMarkerFile)
	if err := writeSynced(path+".tmp", append(b, '\n')); err != nil {
		return "", fmt.Errorf("run marker: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return "", fmt.Errorf("run marker: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return "", fmt.Errorf("run marker: %w", err)
	}
	return path, nil
}

// removeRunMarker removes the run marker at path (nothing when ""): the
// run stopped cleanly, every log closed.
func removeRunMarker(path string) error {
	if path == "" {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// replaceStorageID writes a new storage identity in dir, durably, and
// returns it.
func replaceStorageID(dir string) (string, error) {
	id := newStorageID()
	path := filepath.Join(dir, storageIDFile)
	if err := writeSynced(path+".tmp", []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("storage identity: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return "", fmt.Errorf("storage identity: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return "", fmt.Errorf("storage identity: %w", err)
	}
	return id, nil
}

// syncDir fsyncs directory dir, so a rename or removal in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

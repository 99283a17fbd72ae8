package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// A catalog opened with CatalogUnsynced is a cache of the raft log: its
// commits are not fsynced, because everything it holds can be rebuilt
// from the raft snapshot and the entries after it, which raft storage
// keeps durably until a newer snapshot covers them.
//
// An unsynced bbolt file survives the process being killed (its writes are
// in the kernel's page cache) but not the machine losing power: pages can
// reach the disk out of order and leave a tree that points at garbage. So
// while the file is open, a marker beside it names the current boot. At
// the next open, a marker from another boot means the machine went down
// with the catalog open; the file is then discarded and rebuilt by raft's
// replay (the node's restart installs the stored snapshot, then re-applies
// the entries after it). A clean Close syncs the file and removes the
// marker.

// bootIDPath is where Linux names the current boot.
var bootIDPath = "/proc/sys/kernel/random/boot_id"

// unsyncedMarkerSuffix names the marker beside the catalog file.
const unsyncedMarkerSuffix = ".open"

// markerUntrusted is written when a sync failed: the file must be rebuilt
// whatever the boot.
const markerUntrusted = "untrusted"

// currentBoot returns this boot's id, or "" where the system has none (the
// file is then rebuilt after any unclean stop).
func currentBoot() string {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// prepareUnsynced checks the marker of the catalog at path before bbolt
// opens it, discards the file when it cannot be trusted, and writes a new
// marker for this open.
func prepareUnsynced(path string, log *slog.Logger) error {
	marker := path + unsyncedMarkerSuffix
	boot := currentBoot()
	prev, err := os.ReadFile(marker)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Closed cleanly, or never opened unsynced.
	case err != nil:
		return fmt.Errorf("read %s: %w", marker, err)
	case boot != "" && string(prev) == boot:
		// The process stopped without closing, but the machine did not:
		// every write is in the page cache, and bbolt's own commit order
		// keeps the last complete transaction.
	default:
		why := "the machine restarted while it was open"
		if string(prev) == markerUntrusted {
			why = "a sync of it failed"
		}
		log.Warn("discarding the catalog file: it is rebuilt from the raft log", "path", path, "reason", why)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("discard %s: %w", path, err)
		}
	}
	if boot == "" {
		boot = markerUntrusted
	}
	return writeSynced(marker, []byte(boot))
}

// finishUnsynced removes the marker of a catalog file closed after a
// successful sync; when the sync failed it marks the file untrusted, so
// the next open rebuilds it.
func finishUnsynced(path string, syncErr error) error {
	marker := path + unsyncedMarkerSuffix
	if syncErr != nil {
		markErr := writeSynced(marker, []byte(markerUntrusted))
		return errors.Join(fmt.Errorf("sync %s: %w", path, syncErr), markErr)
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// writeSynced writes data to the file at path and syncs it and its
// directory. A marker torn by a crash matches no boot, so the worst case
// is a rebuild; no temporary file is needed.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

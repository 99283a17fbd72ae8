// Package atomicfile writes small files so that a crash leaves either the
// old content or the new, never a torn or empty file.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes b to path with perm: into path+".tmp" in the same
// directory (truncating one a crash left), fsynced, renamed over path,
// and the directory fsynced so the rename survives a crash.
func Write(path string, b []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	err = f.Chmod(perm) // a leftover may have another mode
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, so that a rename or creation in it
// survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

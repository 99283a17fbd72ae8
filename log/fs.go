package log

import (
	"io"
	"os"
)

// FS is the narrow file-system surface the log uses, so tests can inject
// faults (short writes, ENOSPC, fsync errors). Names are full paths.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file like os.Remove.
	Remove(name string) error
	// ReadDir lists a directory like os.ReadDir.
	ReadDir(name string) ([]os.DirEntry, error)
	// MkdirAll creates a directory and its parents like os.MkdirAll.
	MkdirAll(path string, perm os.FileMode) error
	// SyncDir fsyncs a directory so that files created or removed in it
	// survive a machine crash.
	SyncDir(name string) error
	// Rename moves a file like os.Rename (atomically replacing newpath).
	// The log itself never renames; owners that keep files beside a log
	// (a cache's index snapshot) write them through the same FS.
	Rename(oldpath, newpath string) error
}

// File is an open file. The log writes only through Write on files opened
// with os.O_APPEND, and reads only through ReadAt.
type File interface {
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync flushes the file's data to stable storage.
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Stat describes the file.
	Stat() (os.FileInfo, error)
}

// Allocator is a File that can reserve disk space ahead of its writes.
// A log with BufferAppends buffers only on files that are Allocators, so
// that a full disk refuses an append when it is made rather than when its
// buffered bytes are written.
type Allocator interface {
	// Allocate reserves size bytes from off without changing the file's
	// size, so writes into them cannot fail for want of space.
	Allocate(off, size int64) error
}

// OSFS returns the real operating-system file system.
func OSFS() FS { return osFS{} }

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// osFile is an *os.File that reserves space where the system can (see
// allocate_*.go).
type osFile struct{ *os.File }

func (f osFile) Allocate(off, size int64) error { return allocate(f.File, off, size) }

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

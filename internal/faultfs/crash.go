package faultfs

import (
	"os"
	"sync"
	"syscall"

	flog "github.com/felixmq/felix/log"
)

// Crash wraps a file system and simulates a machine that stops at one
// step: from the armed step on, every mutating operation (create, write,
// truncate, remove, rename, fsync of a file or a directory) fails with
// EIO, so the files stay exactly as they were at that instant. The write
// at the crash point lands half its bytes first, as a torn write does.
// (log's own tests keep a copy of this inside the package, which cannot
// import this one.)
type Crash struct {
	flog.FS
	mu    sync.Mutex
	armed bool
	left  int // mutating operations that may still succeed
	hit   bool
}

// NewCrash wraps fsys; it does not crash until Arm.
func NewCrash(fsys flog.FS) *Crash { return &Crash{FS: fsys} }

// Arm makes the (n+1)-th mutating operation from now the crash point.
func (c *Crash) Arm(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.left, c.hit = true, n, false
}

// Crashed reports whether the crash point was reached.
func (c *Crash) Crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hit
}

// step accounts for one mutating operation; false means it must fail.
// torn is true only for the operation at the crash point itself.
func (c *Crash) step() (ok, torn bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return true, false
	}
	if c.hit {
		return false, false
	}
	if c.left == 0 {
		c.hit = true
		return false, true
	}
	c.left--
	return true, false
}

var errCrashed = &os.PathError{Op: "crash", Path: "faultfs.Crash", Err: syscall.EIO}

// OpenFile counts a create or truncate as a mutating operation.
func (c *Crash) OpenFile(name string, flag int, perm os.FileMode) (flog.File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		if ok, _ := c.step(); !ok {
			return nil, errCrashed
		}
	}
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, fs: c}, nil
}

// Remove fails from the crash point on.
func (c *Crash) Remove(name string) error {
	if ok, _ := c.step(); !ok {
		return errCrashed
	}
	return c.FS.Remove(name)
}

// Rename fails from the crash point on.
func (c *Crash) Rename(oldpath, newpath string) error {
	if ok, _ := c.step(); !ok {
		return errCrashed
	}
	return c.FS.Rename(oldpath, newpath)
}

// SyncDir fails from the crash point on.
func (c *Crash) SyncDir(name string) error {
	if ok, _ := c.step(); !ok {
		return errCrashed
	}
	return c.FS.SyncDir(name)
}

type crashFile struct {
	flog.File
	fs *Crash
}

func (f *crashFile) Write(b []byte) (int, error) {
	ok, torn := f.fs.step()
	if ok {
		return f.File.Write(b)
	}
	if torn && len(b) > 1 {
		n, _ := f.File.Write(b[:len(b)/2])
		return n, errCrashed
	}
	return 0, errCrashed
}

func (f *crashFile) Truncate(size int64) error {
	if ok, _ := f.fs.step(); !ok {
		return errCrashed
	}
	return f.File.Truncate(size)
}

func (f *crashFile) Sync() error {
	if ok, _ := f.fs.step(); !ok {
		return errCrashed
	}
	return f.File.Sync()
}

// Allocate reserves space like the wrapped file (a mutating operation:
// it fails from the crash point on); a file that cannot reserve says so.
func (f *crashFile) Allocate(off, size int64) error {
	al, ok := f.File.(flog.Allocator)
	if !ok {
		return errNoAllocate
	}
	if ok, _ := f.fs.step(); !ok {
		return errCrashed
	}
	return al.Allocate(off, size)
}

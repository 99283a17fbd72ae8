package log

import (
	"os"
	"sync"
	"syscall"
)

// crashFS wraps an FS and simulates a machine that stops at one step: the
// armed-th mutating operation (create, write, truncate, remove, fsync of a
// file or a directory) and every later one fail with EIO, so the files
// stay exactly as they were at that instant. A write at the crash point
// lands half its bytes first, as a torn write does.
type crashFS struct {
	FS
	mu    sync.Mutex
	armed bool
	left  int // mutating operations that may still succeed
	hit   bool
}

// arm makes the (n+1)-th mutating operation from now the crash point.
func (c *crashFS) arm(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.left, c.hit = true, n, false
}

// crashed reports whether the crash point was reached.
func (c *crashFS) crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hit
}

// step accounts for one mutating operation; false means it must fail.
// torn is true only for the operation at the crash point itself.
func (c *crashFS) step() (ok, torn bool) {
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

var errCrashed = &os.PathError{Op: "crash", Path: "crashFS", Err: syscall.EIO}

func (c *crashFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
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

func (c *crashFS) Remove(name string) error {
	if ok, _ := c.step(); !ok {
		return errCrashed
	}
	return c.FS.Remove(name)
}

func (c *crashFS) Rename(oldpath, newpath string) error {
	if ok, _ := c.step(); !ok {
		return errCrashed
	}
	return c.FS.Rename(oldpath, newpath)
}

func (c *crashFS) SyncDir(name string) error {
	if ok, _ := c.step(); !ok {
		return errCrashed
	}
	return c.FS.SyncDir(name)
}

type crashFile struct {
	File
	fs *crashFS
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

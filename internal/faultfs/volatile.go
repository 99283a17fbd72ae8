package faultfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	flog "github.com/felixmq/felix/log"
)

// Volatile wraps a file system and remembers, for each file written
// through it, how much of it an fsync covered, so that CrashCopy can
// leave what a machine crash would: every such file cut back to its
// synced size. It is coarse on purpose: a file's synced size is its size
// when an fsync began (a write racing that fsync is counted as lost), a
// file created through it counts as holding nothing until its first
// fsync, and directory entries are taken as durable.
type Volatile struct {
	flog.FS
	mu     sync.Mutex
	synced map[string]int64 // cleaned path → bytes an fsync covered
}

// NewVolatile wraps fsys.
func NewVolatile(fsys flog.FS) *Volatile {
	return &Volatile{FS: fsys, synced: map[string]int64{}}
}

// OpenFile opens a file whose fsyncs are remembered; a new or truncated
// file holds nothing durable yet.
func (v *Volatile) OpenFile(name string, flag int, perm os.FileMode) (flog.File, error) {
	f, err := v.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	name = filepath.Clean(name)
	v.mu.Lock()
	if _, ok := v.synced[name]; !ok && flag&os.O_CREATE != 0 || flag&os.O_TRUNC != 0 {
		if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
			v.synced[name] = 0
		}
	}
	v.mu.Unlock()
	return &volatileFile{File: f, fs: v, name: name}, nil
}

// Remove forgets the file.
func (v *Volatile) Remove(name string) error {
	err := v.FS.Remove(name)
	if err == nil {
		v.mu.Lock()
		delete(v.synced, filepath.Clean(name))
		v.mu.Unlock()
	}
	return err
}

// Rename moves what is known of the file with it.
func (v *Volatile) Rename(oldpath, newpath string) error {
	err := v.FS.Rename(oldpath, newpath)
	if err == nil {
		v.mu.Lock()
		oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
		if n, ok := v.synced[oldpath]; ok {
			v.synced[newpath] = n
			delete(v.synced, oldpath)
		} else {
			delete(v.synced, newpath)
		}
		v.mu.Unlock()
	}
	return err
}

// CrashCopy copies the tree src to dst (a directory that exists) as a
// machine crash now would leave it: each file written through v cut to
// what its fsyncs covered, every other file whole.
func (v *Volatile) CrashCopy(src, dst string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		limit := int64(-1)
		if n, ok := v.synced[filepath.Clean(p)]; ok {
			limit = n
		}
		return copyPrefix(p, out, limit)
	})
}

// copyPrefix copies the first limit bytes of src (all with limit < 0).
func copyPrefix(src, dst string, limit int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	var r io.Reader = in
	if limit >= 0 {
		r = io.LimitReader(in, limit)
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

type volatileFile struct {
	flog.File
	fs   *Volatile
	name string
}

// Sync notes the size the file had when the fsync began, once it
// succeeds.
func (f *volatileFile) Sync() error {
	fi, err := f.File.Stat()
	if err != nil {
		return err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.synced[f.name] = max(f.fs.synced[f.name], fi.Size())
	f.fs.mu.Unlock()
	return nil
}

// Truncate keeps the synced size within the file.
func (f *volatileFile) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.fs.mu.Lock()
	if n, ok := f.fs.synced[f.name]; ok && n > size {
		f.fs.synced[f.name] = size
	}
	f.fs.mu.Unlock()
	return nil
}

// Allocate passes a space reservation through to the wrapped file.
func (f *volatileFile) Allocate(off, size int64) error { return allocate(f.File, off, size) }

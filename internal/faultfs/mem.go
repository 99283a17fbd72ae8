package faultfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	flog "github.com/felixmq/felix/log"
)

// Mem is an in-memory file system for fuzzing recovery code: real files
// (fsyncs above all) make fuzzing crawl on a shared disk. Directories are
// implicit. (log's own tests keep a copy of this inside the package,
// which cannot import this one.)
type Mem struct {
	mu    sync.Mutex
	files map[string]*memData
}

type memData struct{ b []byte }

// NewMem returns an empty file system.
func NewMem() *Mem { return &Mem{files: map[string]*memData{}} }

// Put stores a file's bytes.
func (m *Mem) Put(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[filepath.Clean(name)] = &memData{b: append([]byte(nil), b...)}
}

// Bytes returns a copy of a file's bytes; ok is false when it does not
// exist.
func (m *Mem) Bytes(name string) (b []byte, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.files[filepath.Clean(name)]
	if !ok {
		return nil, false
	}
	return append([]byte(nil), d.b...), true
}

// OpenFile opens a file like os.OpenFile.
func (m *Mem) OpenFile(name string, flag int, perm os.FileMode) (flog.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	d, ok := m.files[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		d = &memData{}
		m.files[name] = d
	}
	if flag&os.O_TRUNC != 0 {
		d.b = d.b[:0]
	}
	return &memFile{fs: m, d: d, name: name, appendOnly: flag&os.O_APPEND != 0}, nil
}

// Remove deletes a file.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if _, ok := m.files[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

// ReadDir lists the files directly in dir.
func (m *Mem) ReadDir(dir string) ([]os.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []os.DirEntry
	for n, d := range m.files {
		if filepath.Dir(n) == filepath.Clean(dir) {
			out = append(out, memInfo{name: filepath.Base(n), size: int64(len(d.b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// MkdirAll does nothing: directories are implicit.
func (m *Mem) MkdirAll(string, os.FileMode) error { return nil }

// Rename moves a file.
func (m *Mem) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.files[filepath.Clean(oldpath)]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldpath, Err: fs.ErrNotExist}
	}
	delete(m.files, filepath.Clean(oldpath))
	m.files[filepath.Clean(newpath)] = d
	return nil
}
func (m *Mem) SyncDir(string) error { return nil }

type memFile struct {
	fs         *Mem
	d          *memData
	name       string
	appendOnly bool
	pos        int64
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.d.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.d.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.appendOnly {
		f.pos = int64(len(f.d.b))
	}
	for int64(len(f.d.b)) < f.pos {
		f.d.b = append(f.d.b, 0)
	}
	f.d.b = append(f.d.b[:f.pos], append(p, f.d.b[min(int64(len(f.d.b)), f.pos+int64(len(p))):]...)...)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	for int64(len(f.d.b)) < size {
		f.d.b = append(f.d.b, 0)
	}
	f.d.b = f.d.b[:size]
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return memInfo{name: filepath.Base(f.name), size: int64(len(f.d.b))}, nil
}

func (f *memFile) Sync() error  { return nil }
func (f *memFile) Close() error { return nil }

// memInfo is both the os.FileInfo and the os.DirEntry of a memFS file.
type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string               { return i.name }
func (i memInfo) Size() int64                { return i.size }
func (i memInfo) Mode() os.FileMode          { return 0o644 }
func (i memInfo) ModTime() time.Time         { return time.Time{} }
func (i memInfo) IsDir() bool                { return false }
func (i memInfo) Sys() any                   { return nil }
func (i memInfo) Type() os.FileMode          { return 0 }
func (i memInfo) Info() (os.FileInfo, error) { return i, nil }

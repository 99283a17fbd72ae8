package log

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// memFS is an in-memory FS for fuzzing: the fuzz targets check recovery
// logic, and real files make fuzzing crawl on a shared disk.
type memFS struct {
	mu    sync.Mutex
	files map[string]*memData
}

type memData struct{ b []byte }

func newMemFS() *memFS { return &memFS{files: map[string]*memData{}} }

// put stores a file's bytes.
func (m *memFS) put(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[filepath.Clean(name)] = &memData{b: append([]byte(nil), b...)}
}

// clone returns a copy of every file, as a crash would leave them.
func (m *memFS) clone() *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := newMemFS()
	for n, d := range m.files {
		c.files[n] = &memData{b: append([]byte(nil), d.b...)}
	}
	return c
}

// digest returns every file's bytes, for comparisons.
func (m *memFS) digest() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.files))
	for n := range m.files {
		names = append(names, n)
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, n := range names {
		sb.WriteString(n)
		sb.WriteByte(0)
		sb.Write(m.files[n].b)
		sb.WriteByte(0)
	}
	return sb.String()
}

func (m *memFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
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

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if _, ok := m.files[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

func (m *memFS) ReadDir(dir string) ([]os.DirEntry, error) {
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

func (m *memFS) MkdirAll(string, os.FileMode) error { return nil }

func (m *memFS) Rename(oldpath, newpath string) error {
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
func (m *memFS) SyncDir(string) error { return nil }

type memFile struct {
	fs         *memFS
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

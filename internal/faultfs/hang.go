// Package faultfs holds file systems that misbehave on purpose, for the
// tests of packages that write through log.FS. Only tests import it.
package faultfs

import (
	"errors"
	"os"
	"sync"

	flog "github.com/felixmq/felix/log"
)

// Hang makes fsyncs hang while hung, until Release: a disk that stopped
// answering. Everything else passes through to the real file system.
type Hang struct {
	flog.FS
	mu      sync.Mutex
	hung    bool
	gate    chan struct{} // closed by Release
	blocked chan struct{}
}

// NewHang returns a Hang that does not hang yet.
func NewHang() *Hang {
	return &Hang{FS: flog.OSFS(), gate: make(chan struct{}), blocked: make(chan struct{}, 64)}
}

// Start makes every fsync from now on hang until Release.
func (f *Hang) Start() { f.mu.Lock(); f.hung = true; f.mu.Unlock() }

// Release lets every hung and later fsync through. A second call does
// nothing.
func (f *Hang) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hung {
		f.hung = false
		close(f.gate)
	}
}

// Blocked receives once per fsync that hangs (up to 64 not yet received).
func (f *Hang) Blocked() <-chan struct{} { return f.blocked }

// OpenFile opens a file whose Sync hangs while f does.
func (f *Hang) OpenFile(name string, flag int, perm os.FileMode) (flog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &hangFile{File: file, fs: f}, nil
}

type hangFile struct {
	flog.File
	fs *Hang
}

func (f *hangFile) Sync() error {
	f.fs.mu.Lock()
	hung, gate := f.fs.hung, f.fs.gate
	f.fs.mu.Unlock()
	if hung {
		select {
		case f.fs.blocked <- struct{}{}:
		default:
		}
		<-gate
	}
	return f.File.Sync()
}

// Allocate passes a space reservation through to the wrapped file.
func (f *hangFile) Allocate(off, size int64) error { return allocate(f.File, off, size) }

// errNoAllocate answers a reservation on a file that cannot make one.
var errNoAllocate = errors.New("faultfs: the wrapped file reserves no space")

// allocate reserves space through f if it can.
func allocate(f flog.File, off, size int64) error {
	if al, ok := f.(flog.Allocator); ok {
		return al.Allocate(off, size)
	}
	return errNoAllocate
}

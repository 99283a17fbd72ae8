package log

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// faultFS wraps the real file system and injects faults into segment
// (.log) files: a write budget that ends in ENOSPC, fsync errors, and a
// gate that holds fsyncs.
type faultFS struct {
	FS
	mu        sync.Mutex
	budget    int64 // bytes segment writes may still use; < 0 means unlimited
	writeErr  error // when set, segment writes fail with it
	allocErr  error // when set, segment space reservations fail with it
	syncErr   error
	syncGate  chan struct{} // when non-nil, fsyncs wait for it to close
	syncCalls atomic.Int64
	syncEnter chan struct{} // when non-nil, receives one token per fsync start (non-blocking)
	createErr error         // when non-nil, creating a segment file fails with it
	truncErr  error         // when non-nil, truncating a segment fails with it
}

func newFaultFS() *faultFS { return &faultFS{FS: OSFS(), budget: -1} }

func (fs *faultFS) setBudget(n int64) { fs.mu.Lock(); fs.budget = n; fs.mu.Unlock() }
func (fs *faultFS) setSyncErr(err error) {
	fs.mu.Lock()
	fs.syncErr = err
	fs.mu.Unlock()
}

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	fs.mu.Lock()
	cerr := fs.createErr
	fs.mu.Unlock()
	if cerr != nil && flag&os.O_CREATE != 0 && strings.HasSuffix(name, logSuffix) {
		return nil, &os.PathError{Op: "open", Path: name, Err: cerr}
	}
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, logSuffix) {
		return f, err
	}
	return &faultFile{File: f, fs: fs}, nil
}

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) Write(b []byte) (int, error) {
	f.fs.mu.Lock()
	if werr := f.fs.writeErr; werr != nil {
		f.fs.mu.Unlock()
		return 0, werr
	}
	budget := f.fs.budget
	if budget >= 0 {
		f.fs.budget = max(0, budget-int64(len(b)))
	}
	f.fs.mu.Unlock()
	if budget < 0 || int64(len(b)) <= budget {
		return f.File.Write(b)
	}
	n, err := f.File.Write(b[:budget]) // a partial write, as a full disk gives
	if err != nil {
		return n, err
	}
	return n, &os.PathError{Op: "write", Path: "segment", Err: syscall.ENOSPC}
}

// Allocate reserves space through the real file (whose writes the
// budget still limits, like a file system that does not honour
// reservations), or fails with allocErr.
func (f *faultFile) Allocate(off, size int64) error {
	f.fs.mu.Lock()
	aerr := f.fs.allocErr
	f.fs.mu.Unlock()
	if aerr != nil {
		return aerr
	}
	al, ok := f.File.(Allocator)
	if !ok {
		return errors.New("not an Allocator")
	}
	return al.Allocate(off, size)
}

func (f *faultFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	terr := f.fs.truncErr
	f.fs.mu.Unlock()
	if terr != nil {
		return terr
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	f.fs.syncCalls.Add(1)
	f.fs.mu.Lock()
	gate, serr, enter := f.fs.syncGate, f.fs.syncErr, f.fs.syncEnter
	f.fs.mu.Unlock()
	if enter != nil {
		select {
		case enter <- struct{}{}:
		default:
		}
	}
	if gate != nil {
		<-gate
	}
	if serr != nil {
		return serr
	}
	return f.File.Sync()
}

// quietLogger discards log output.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testOptions returns small-segment options in a fresh temp dir.
func testOptions(t testing.TB) Options {
	return Options{Dir: filepath.Join(t.TempDir(), "log"), SegmentBytes: 4096, IndexIntervalBytes: 256,
		Fsync: FsyncNone, Logger: quietLogger()}
}

// mustOpen opens a log that the test's cleanup checks and closes: its
// invariants hold, Close succeeds, and the directory then opens cleanly
// with consistent index files.
func mustOpen(t testing.TB, o Options) *Log {
	t.Helper()
	return openChecked(t, o, false)
}

// mustOpenFailing is mustOpen for a test that fails the log on purpose:
// the cleanup requires Close to report that failure (ErrFailed) and the
// directory, which may hold unsynced records, to be one Open accepts.
func mustOpenFailing(t testing.TB, o Options) *Log {
	t.Helper()
	return openChecked(t, o, true)
}

func openChecked(t testing.TB, o Options, wantFailed bool) *Log {
	t.Helper()
	l, rep, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v (report %+v)", err, rep)
	}
	t.Cleanup(func() {
		if err := l.check(); err != nil {
			t.Errorf("invariants: %v", err)
		}
		err := l.Close()
		switch {
		case wantFailed && !errors.Is(err, ErrFailed):
			t.Errorf("Close of a log failed on purpose: %v, want an error wrapping ErrFailed", err)
		case !wantFailed && err != nil:
			t.Errorf("Close: %v", err)
		}
		fsys := o.FS
		if fsys == nil {
			fsys = OSFS()
		}
		rep, err := inspectFS(fsys, o.Dir)
		if err != nil || rep.Verdict == VerdictRefuse || (!wantFailed && rep.Verdict != VerdictOpen) {
			t.Errorf("after close: %v %+v", err, rep)
			return
		}
		for _, s := range rep.Segments {
			if !wantFailed && (!s.IndexOK || !s.TimeIndexOK) {
				t.Errorf("after close: index of %s not consistent", s.File)
			}
		}
	})
	return l
}

// check asserts the invariants declared on Log and segment.
func (l *Log) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.synced > l.written || l.written > l.next || l.durable > l.next {
		return fmt.Errorf("synced %d written %d durable %d next %d", l.synced, l.written, l.durable, l.next)
	}
	if (len(l.buf) == 0) != (l.written == l.next) {
		return fmt.Errorf("%d bytes buffered, written %d, next %d", len(l.buf), l.written, l.next)
	}
	if len(l.segs) == 0 {
		return errors.New("no segments")
	}
	for i, s := range l.segs {
		if i > 0 && s.base != l.segs[i-1].next {
			return fmt.Errorf("segment %d base %d, previous next %d", i, s.base, l.segs[i-1].next)
		}
		if s.next != s.base+s.records || len(s.offIdx) != len(s.timeIdx) {
			return fmt.Errorf("segment %s: base %d records %d next %d idx %d/%d", s.name(), s.base, s.records, s.next, len(s.offIdx), len(s.timeIdx))
		}
		if s.records > 0 && (len(s.offIdx) == 0 || s.offIdx[0].pos != 0) {
			return fmt.Errorf("segment %s: first record not indexed", s.name())
		}
	}
	if l.active().next != l.next {
		return fmt.Errorf("active next %d, log next %d", l.active().next, l.next)
	}
	return nil
}

// payload makes a recognizable payload for offset i.
func payload(i int, size int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, size)
	copy(b, fmt.Sprintf("rec-%d-", i))
	return b
}

// appendN appends n single-record batches and returns their payloads.
func appendN(t testing.TB, l *Log, n, size int) [][]byte {
	t.Helper()
	var out [][]byte
	start := int(l.NextOffset())
	for i := range n {
		p := payload(start+i, size)
		if _, err := l.Append([][]byte{p}, "pub"); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, p)
	}
	return out
}

// readAll reads every record from from to the end.
func readAll(t testing.TB, l *Log, from uint64) []Record {
	t.Helper()
	var out []Record
	for {
		recs, next, err := l.Read(from, ^uint64(0), 7, 0)
		if err != nil {
			t.Fatalf("read from %d: %v", from, err)
		}
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
		from = next
	}
}

// dirDigest hashes every file in dir (names, sizes and bytes).
func dirDigest(t testing.TB, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// clock is an injectable time source.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock    { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

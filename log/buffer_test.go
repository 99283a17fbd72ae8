package log

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

func bufferedOptions(t *testing.T) Options {
	o := testOptions(t)
	o.SegmentBytes = 1 << 20
	o.Fsync, o.BufferAppends = FsyncAlways, true
	return o
}

// TestBufferedAppendsShareOneWrite: with BufferAppends under FsyncAlways,
// appends stay in memory until a Wait's fsync (or a read) writes every
// buffered record in one write; they are readable meanwhile, and all of
// them survive Close and reopen.
func TestBufferedAppendsShareOneWrite(t *testing.T) {
	o := bufferedOptions(t)
	l := mustOpen(t, o)
	want := appendN(t, l, 50, 100)
	if st := l.Stats(); st.Writes != 0 || st.Appends != 50 || l.DurableOffset() != 0 {
		t.Fatalf("after 50 buffered appends: %d writes, %d appends, durable %d", st.Writes, st.Appends, l.DurableOffset())
	}
	r, err := l.ReadRecord(10)
	if err != nil || string(r.Payload) != string(want[10]) {
		t.Fatalf("read of a buffered record: %v", err)
	}
	if st := l.Stats(); st.Writes != 1 {
		t.Fatalf("the read wrote the buffer in %d writes, want 1", st.Writes)
	}
	want = append(want, appendN(t, l, 20, 100)...)
	last, err := l.Append([][]byte{payload(70, 100)}, "pub")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, payload(70, 100))
	if err := l.Wait(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Writes != 2 || l.DurableOffset() != 71 {
		t.Fatalf("after a Wait: %d writes (want 2), durable %d", st.Writes, l.DurableOffset())
	}
	more := appendN(t, l, 5, 100) // left buffered: Close writes them
	want = append(want, more...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, Options{Dir: o.Dir, Logger: o.Logger})
	got := readAll(t, l2, 0)
	if len(got) != len(want) {
		t.Fatalf("reopened with %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if string(r.Payload) != string(want[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}

// TestBufferedAppendsStallOnAFullDisk: buffered records a full disk
// refuses stay buffered and their Wait waits; later appends are refused
// with ErrNoSpace and consume nothing; once there is room an append
// writes them and goes on at the next offset.
func TestBufferedAppendsStallOnAFullDisk(t *testing.T) {
	o := bufferedOptions(t)
	fs := newFaultFS()
	o.FS = fs
	l := mustOpen(t, o)
	want := appendN(t, l, 5, 100)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	staged, err := l.Append([][]byte{payload(5, 100), payload(6, 100)}, "pub")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, payload(5, 100), payload(6, 100))
	fs.setBudget(recSize / 2)
	if err := l.Sync(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("sync of buffered records on a full disk: %v", err)
	}
	if _, err := l.Append([][]byte{payload(7, 100)}, "pub"); !errors.Is(err, ErrNoSpace) || l.NextOffset() != 7 || l.Err() != nil {
		t.Fatalf("append while stalled: %v, next %d, log err %v", err, l.NextOffset(), l.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx, staged); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for records a full disk holds back: %v", err)
	}
	if err := l.check(); err != nil {
		t.Fatal(err)
	}
	fs.setBudget(-1)
	a, err := l.Append([][]byte{payload(7, 100)}, "pub")
	if err != nil || a.Base != 7 {
		t.Fatalf("append once there is room: %+v %v", a, err)
	}
	want = append(want, payload(7, 100))
	if err := l.Wait(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(context.Background(), staged); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if string(r.Payload) != string(want[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}

// TestBufferedWriteErrorFailsTheLog: any other error writing buffered
// records fails the log: their Wait and later appends fail with
// ErrFailed, and what was synced before stays.
func TestBufferedWriteErrorFailsTheLog(t *testing.T) {
	o := bufferedOptions(t)
	fs := newFaultFS()
	o.FS = fs
	l := mustOpenFailing(t, o)
	appendN(t, l, 3, 100)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	a, err := l.Append([][]byte{payload(3, 100)}, "pub")
	if err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	fs.writeErr = &os.PathError{Op: "write", Path: "segment", Err: syscall.EIO}
	fs.mu.Unlock()
	if err := l.Wait(context.Background(), a); !errors.Is(err, ErrFailed) {
		t.Fatalf("wait after a failed write of buffered records: %v", err)
	}
	if _, err := l.Append([][]byte{payload(4, 100)}, "pub"); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failure: %v", err)
	}
	if l.DurableOffset() != 3 {
		t.Fatalf("durable %d after the failure, want the 3 synced records", l.DurableOffset())
	}
}

// TestBufferedAppendOnAFullDiskIsRefusedAtOnce: a buffered append whose
// space the disk cannot reserve is refused when it is made (ErrNoSpace,
// nothing consumed), as an unbuffered one is, and appends go on once
// there is room.
func TestBufferedAppendOnAFullDiskIsRefusedAtOnce(t *testing.T) {
	o := bufferedOptions(t)
	fs := newFaultFS()
	o.FS = fs
	l := mustOpen(t, o)
	appendN(t, l, 3, 100)
	big := make([]byte, reserveChunk) // passes the first reserved chunk
	fs.mu.Lock()
	fs.allocErr = &os.PathError{Op: "fallocate", Path: "segment", Err: syscall.ENOSPC}
	fs.mu.Unlock()
	if _, err := l.Append([][]byte{big}, "pub"); !errors.Is(err, ErrNoSpace) || l.NextOffset() != 3 {
		t.Fatalf("append the disk cannot reserve: %v, next %d", err, l.NextOffset())
	}
	fs.mu.Lock()
	fs.allocErr = nil
	fs.mu.Unlock()
	a, err := l.Append([][]byte{big}, "pub")
	if err != nil || a.Base != 3 {
		t.Fatalf("append once there is room: %+v %v", a, err)
	}
	if err := l.Wait(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// TestBufferedAppendsWithoutReservationAreWrittenAtOnce: on a file that
// cannot reserve space, BufferAppends writes each append at once.
func TestBufferedAppendsWithoutReservationAreWrittenAtOnce(t *testing.T) {
	o := bufferedOptions(t)
	o.FS = noAllocFS{OSFS()}
	l := mustOpen(t, o)
	appendN(t, l, 4, 100)
	if st := l.Stats(); st.Writes != 4 {
		t.Fatalf("%d writes for 4 appends without reservation", st.Writes)
	}
}

// noAllocFS hides the real files' Allocate.
type noAllocFS struct{ FS }

func (f noAllocFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return struct{ File }{file}, nil
}

package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestNoSpace(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 10 * recSize
	fs := newFaultFS()
	o.FS = fs
	l, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	want := appendN(t, l, 15, 100)
	fs.setBudget(recSize + 40) // one record and part of the next
	var failed error
	for i := 0; i < 5 && failed == nil; i++ {
		p := payload(len(want), 100)
		if _, failed = l.Append([][]byte{p}, "pub"); failed == nil {
			want = append(want, p)
		}
	}
	if !errors.Is(failed, ErrNoSpace) || !errors.Is(failed, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", failed)
	}
	if l.NextOffset() != 16 || l.Err() != nil {
		t.Fatalf("next %d err %v", l.NextOffset(), l.Err())
	}
	// A batch fails as a whole.
	if _, err := l.Append([][]byte{payload(16, 100), payload(17, 100)}, "pub"); !errors.Is(err, ErrNoSpace) || l.NextOffset() != 16 {
		t.Fatalf("batch on a full disk: %v next %d", err, l.NextOffset())
	}
	if err := l.check(); err != nil {
		t.Fatal(err)
	}
	// Space returns: appends continue at the same offsets.
	fs.setBudget(-1)
	a, err := l.Append([][]byte{payload(16, 100)}, "pub")
	if err != nil || a.Base != 16 {
		t.Fatalf("append after space returned: %+v %v", a, err)
	}
	want = append(want, payload(16, 100))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o.FS = nil
	l2, rep, err := Open(o)
	if err != nil || rep.Verdict != VerdictOpen {
		t.Fatalf("reopen: %v %+v", err, rep)
	}
	defer l2.Close()
	got := readAll(t, l2, 0)
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if !bytes.Equal(r.Payload, want[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}

// TestNoSpaceRealFS fills a small real file system. Given
// FELIX_TEST_SMALLFS_DIR it uses that directory; otherwise it re-runs
// itself in a private user and mount namespace (unshare -Urm) on a 1 MiB
// tmpfs, which needs no root, and skips when that is not possible.
func TestNoSpaceRealFS(t *testing.T) {
	root := os.Getenv("FELIX_TEST_SMALLFS_DIR")
	if root == "" {
		runInSmallFS(t)
		return
	}
	dir, err := os.MkdirTemp(root, "felix-log-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	o := Options{Dir: dir, SegmentBytes: 1 << 20, Fsync: FsyncNone, Logger: quietLogger()}
	l, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := make([]byte, 64<<10)
	for {
		if _, err = l.Append([][]byte{p}, ""); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrNoSpace) || l.Err() != nil {
		t.Fatalf("append on a full fs: %v (log err %v)", err, l.Err())
	}
	next := l.NextOffset()
	t.Logf("disk full after %d records: %v", next, err)
	if got := readAll(t, l, 0); uint64(len(got)) != next {
		t.Fatalf("read %d records, next %d", len(got), next)
	}
}

// TestNoSpaceAtRoll: the new segment cannot be created; the append fails
// with ErrNoSpace, the old segment stays active, and a retry rolls.
func TestNoSpaceAtRoll(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 10 * recSize
	fs := newFaultFS()
	o.FS = fs
	l := mustOpen(t, o)
	appendN(t, l, 10, 100)
	fs.mu.Lock()
	fs.createErr = syscall.ENOSPC
	fs.mu.Unlock()
	if _, err := l.Append([][]byte{payload(10, 100)}, "pub"); !errors.Is(err, ErrNoSpace) || l.NextOffset() != 10 || l.Err() != nil {
		t.Fatalf("append: %v next %d err %v", err, l.NextOffset(), l.Err())
	}
	fs.mu.Lock()
	fs.createErr = nil
	fs.mu.Unlock()
	appendN(t, l, 3, 100)
	if st := l.Stats(); st.Segments != 2 || l.NextOffset() != 13 {
		t.Fatalf("segments %d next %d", st.Segments, l.NextOffset())
	}
	if len(readAll(t, l, 0)) != 13 {
		t.Fatal("records lost")
	}
}

// TestRollbackFailureFailsLog: a write error whose partial bytes cannot be
// cut away fails the log, since the file may now hold unconsumed offsets.
func TestRollbackFailureFailsLog(t *testing.T) {
	o := testOptions(t)
	fs := newFaultFS()
	o.FS = fs
	l := mustOpenFailing(t, o)
	appendN(t, l, 3, 100)
	fs.mu.Lock()
	fs.budget, fs.truncErr = 50, syscall.EIO
	fs.mu.Unlock()
	_, err := l.Append([][]byte{payload(3, 100)}, "pub")
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, ErrFailed) || !errors.Is(l.Err(), ErrFailed) {
		t.Fatalf("append: %v (log err %v)", err, l.Err())
	}
	if _, err := l.Append([][]byte{payload(3, 100)}, "pub"); !errors.Is(err, ErrFailed) {
		t.Fatalf("later append: %v", err)
	}
	if l.NextOffset() != 3 {
		t.Fatalf("next %d", l.NextOffset())
	}
}

// runInSmallFS re-runs TestNoSpaceRealFS inside a namespace with a tmpfs.
func runInSmallFS(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		loudSkip(t, "no unshare binary (%v); set FELIX_TEST_SMALLFS_DIR to a directory on a small file system", err)
	}
	dir := t.TempDir()
	script := `mount -t tmpfs -o size=1m felix-test "$1" || exit 77; shift; exec "$@"`
	cmd := exec.Command(unshare, "-Urm", "sh", "-c", script, "sh", dir,
		os.Args[0], "-test.run=^TestNoSpaceRealFS$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "FELIX_TEST_SMALLFS_DIR="+dir)
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil && !bytes.Contains(out, []byte("=== RUN")):
		loudSkip(t, "this machine cannot mount a tmpfs in a user namespace (unshare -Urm: %v; %s); set FELIX_TEST_SMALLFS_DIR to a directory on a small file system",
			err, bytes.TrimSpace(out))
	case err != nil:
		t.Fatalf("in the small file system: %v\n%s", err, out)
	case !bytes.Contains(out, []byte("--- PASS: TestNoSpaceRealFS")):
		t.Fatalf("the test did not run in the small file system:\n%s", out)
	}
	t.Logf("%s", out)
}

// loudSkip skips a test where running it is truly impossible, and says so
// on stderr, so that a skipped full-disk test does not pass for one that
// ran. A t.Log line shows only with -v, and so does the test binary's own
// stderr when go test runs several packages (./...): the go command keeps
// a passing package's output to itself. So the line also goes to the go
// command's stderr, the test binary's parent, where Linux lets us reach it
// (without -v; in a run of one package without -v it then shows twice).
func loudSkip(t *testing.T, because string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(because, args...)
	line := fmt.Sprintf("SKIPPED: %s did not run because %s\n", t.Name(), msg)
	fmt.Fprint(os.Stderr, line)
	if !testing.Verbose() {
		if f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", os.Getppid()), os.O_WRONLY|os.O_APPEND, 0); err == nil {
			fmt.Fprint(f, line)
			f.Close()
		}
	}
	t.Skip(msg)
}

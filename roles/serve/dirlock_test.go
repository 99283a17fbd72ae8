package serve

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestDataDirLock: a second holder of a data directory is refused at
// once with the first one's PID, told when that one is stopping, and
// gets the directory as soon as it is released.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDataDir(dir, roleControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	defer first.release()

	_, err = lockDataDir(dir, roleControlPlane)
	var held *DirHeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Stopping {
		t.Fatalf("second lock: %v (%+v)", err, held)
	}
	if msg := err.Error(); !strings.Contains(msg, "in use by another felix process (PID ") ||
		!strings.Contains(msg, "running a control plane") || !strings.Contains(msg, "stop it first") {
		t.Fatalf("message %q", msg)
	}

	first.stopping()
	_, err = lockDataDir(dir, roleControlPlane)
	if !errors.As(err, &held) || !held.Stopping || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("lock while stopping: %v", err)
	}

	first.release()
	first.release() // twice is harmless
	again, err := lockDataDir(dir, roleControlPlane)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.release()
}

// TestRoleLocks: felix broker and felix controlplane may share a
// directory, felix serve (both roles) may not share it with either, and
// a refused set leaves nothing locked behind.
func TestRoleLocks(t *testing.T) {
	dir := t.TempDir()
	cp, err := lockRoles(dir, roleControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lockRoles(dir, roleBroker)
	if err != nil {
		t.Fatalf("a broker beside a control plane: %v", err)
	}
	b.release()
	var held *DirHeldError
	if _, err := lockRoles(dir, roleBroker, roleControlPlane); !errors.As(err, &held) || held.Role != roleControlPlane {
		t.Fatalf("serve beside a control plane: %v", err)
	}
	// The broker lock the refused set took first was released.
	b, err = lockRoles(dir, roleBroker)
	if err != nil {
		t.Fatalf("broker lock left behind: %v", err)
	}
	b.release()
	cp.release()
}

func TestParseLockState(t *testing.T) {
	cases := []struct {
		in       string
		pid      int
		stopping bool
	}{
		{"123 running\n", 123, false},
		{"123 stopping\n", 123, true},
		{"123", 123, false},
		{"", 0, false},
		{"garbage", 0, false},
		{"-5 running", 0, false},
	}
	for _, tc := range cases {
		pid, stopping := parseLockState(tc.in)
		if pid != tc.pid || stopping != tc.stopping {
			t.Errorf("parseLockState(%q) = %d, %v", tc.in, pid, stopping)
		}
	}
}

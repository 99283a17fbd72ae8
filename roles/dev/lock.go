package dev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const lockFile = "dev.lock"

// lockDataDir takes <data-dir>/dev.lock (an exclusive flock the kernel
// drops when felix dev exits, however it exits) and writes felix dev's
// PID in it, so a second felix dev on the same directory stops before it
// rewrites dev.json and client.json under the running cluster. The file
// is opened close-on-exec: the nodes do not inherit the lock.
func lockDataDir(dataDir string) (release func(), err error) {
	path := filepath.Join(dataDir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another felix dev%s: stop it first, or give this one its own --data-dir",
				dataDir, holder(path))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

// holder names the PID the lock file holds, if it can be read.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		return fmt.Sprintf(" (PID %d)", pid)
	}
	return ""
}

package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned by Open when another Log, in this process or
// another, has the directory open.
var ErrLocked = errors.New("log: directory is in use")

// lockFileName is the file in a log directory that Open holds an exclusive
// advisory lock on while the log is open.
const lockFileName = ".lock"

// lockDir takes the directory's lock. Only the real file system is locked;
// an injected FS (tests) is not. The lock is released when the file is
// closed, and by the kernel when the process dies, so a crash never leaves
// a directory locked.
func lockDir(fs FS, dir string) (*os.File, error) {
	if _, real := fs.(osFS); !real {
		return nil, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: lock %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is open in another log (another broker on the same storage directory?)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("log: lock %s: %w", dir, err)
	}
	return f, nil
}

// unlock releases a lock lockDir took (nil is a no-op).
func unlock(f *os.File) {
	if f != nil {
		f.Close()
	}
}

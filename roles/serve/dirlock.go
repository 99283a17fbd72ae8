package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The roles whose state a data directory holds; each has its lock file,
// <role>.lock, so that felix broker and felix controlplane may share a
// directory as before while two of the same role (or two felix serve)
// may not.
const (
	roleControlPlane = "controlplane"
	roleBroker       = "broker"
)

// DirHeldError is a data directory whose role's state another process
// holds. PID is 0 when the holder's PID could not be read.
type DirHeldError struct {
	Dir      string
	Role     string // roleControlPlane or roleBroker
	PID      int
	Stopping bool // the holder has begun its shutdown
}

func (e *DirHeldError) Error() string {
	who := "another felix process"
	if e.PID > 0 {
		who = fmt.Sprintf("another felix process (PID %d)", e.PID)
	}
	msg := fmt.Sprintf("data directory %s is in use by %s running a %s; ", e.Dir, who, roleName(e.Role))
	if e.Stopping {
		return msg + "it is shutting down and releases the directory when it exits; start again once it has"
	}
	return msg + "stop it first, or give this one its own --data-dir"
}

// dirLock holds one role's lock file in a data directory for the life of
// the process: an exclusive advisory lock (flock) that the kernel drops when
// the process exits, however it exits, with the holder's PID and state
// written in the file for the message a second process prints.
type dirLock struct {
	f *os.File // nil once released
}

func roleName(role string) string {
	if role == roleControlPlane {
		return "control plane"
	}
	return role
}

// dirLocks are the locks of the roles one process runs.
type dirLocks []*dirLock

// lockRoles takes dir's lock of each role, or releases those it took and
// says who holds the first it could not.
func lockRoles(dir string, roles ...string) (dirLocks, error) {
	var ls dirLocks
	for _, r := range roles {
		l, err := lockDataDir(dir, r)
		if err != nil {
			ls.release()
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// stopping records in every lock that the holder has begun its shutdown.
func (ls dirLocks) stopping() {
	for _, l := range ls {
		l.stopping()
	}
}

// release drops every lock.
func (ls dirLocks) release() {
	for _, l := range ls {
		l.release()
	}
}

// lockDataDir takes dir's lock of role, or says who holds it.
func lockDataDir(dir, role string) (*dirLock, error) {
	path := filepath.Join(dir, role+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	held, err := tryLock(f)
	if err != nil || held {
		state := make([]byte, 64)
		k, _ := f.ReadAt(state, 0)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		abs, aerr := filepath.Abs(dir)
		if aerr != nil {
			abs = dir
		}
		pid, stopping := parseLockState(string(state[:k]))
		return nil, &DirHeldError{Dir: abs, Role: role, PID: pid, Stopping: stopping}
	}
	l := &dirLock{f: f}
	l.write("running")
	return l, nil
}

// stopping records that the holder has begun its shutdown.
func (l *dirLock) stopping() { l.write("stopping") }

// write replaces the file's content with "PID STATE\n". A failure only
// costs a second process the PID in its message.
func (l *dirLock) write(state string) {
	if l == nil || l.f == nil {
		return
	}
	b := []byte(strconv.Itoa(os.Getpid()) + " " + state + "\n")
	if _, err := l.f.WriteAt(b, 0); err == nil {
		_ = l.f.Truncate(int64(len(b)))
	}
}

// release empties the file and drops the lock. It is safe on nil and
// more than once.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close() // closing the only descriptor drops the flock
	l.f = nil
}

// parseLockState reads "PID STATE"; anything else is PID 0.
func parseLockState(s string) (pid int, stopping bool) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, len(fields) > 1 && fields[1] == "stopping"
}

// tryLock takes an exclusive flock on f without waiting; held reports
// that another open file description has it.
func tryLock(f *os.File) (held bool, err error) {
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

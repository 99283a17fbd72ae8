package dev

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"sync"
)

// prefixWriter writes whole lines to out, each preceded by prefix. Lines
// of several children share out; mu (shared by them) keeps each line in
// one piece. A line longer than maxLine is written in pieces of maxLine
// bytes, each prefixed.
type prefixWriter struct {
	mu     *sync.Mutex
	out    io.Writer
	prefix string
	buf    []byte // the unfinished line; Invariant: no '\n' in it
}

const maxLine = 64 << 10

func (w *prefixWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			if len(w.buf) >= maxLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			break
		}
		w.emit(append(w.buf, p[:i]...))
		w.buf, p = w.buf[:0], p[i+1:]
	}
	return n, nil
}

// flush writes an unfinished last line.
func (w *prefixWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *prefixWriter) emit(line []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// An error writing our own output is not the child's: it keeps running.
	io.WriteString(w.out, w.prefix)
	w.out.Write(line)
	io.WriteString(w.out, "\n")
}

// child is one running `felix serve`.
type child struct {
	info   *nodeInfo
	cmd    *exec.Cmd
	stdout *prefixWriter
	stderr *prefixWriter
	// done is closed when the process has exited and its output is
	// flushed; err is its exit error then.
	done chan struct{}
	err  error
}

// startChild starts node n with its output prefixed "<name> | " onto
// stdout and stderr (mu shared by every child's writers). The child runs
// in its own process group, so a terminal's Ctrl-C reaches felix dev
// only, which then stops it with one SIGTERM (felix serve would take a
// second signal as "exit now").
func startChild(n *nodeInfo, stdout, stderr io.Writer, mu *sync.Mutex) (*child, error) {
	cmd := exec.Command(n.Argv[0], n.Argv[1:]...)
	cmd.Env = append(inheritedEnv(os.Environ()), n.Env...)
	cmd.SysProcAttr = childAttr()
	prefix := n.Name + " | "
	c := &child{info: n, cmd: cmd, done: make(chan struct{}),
		stdout: &prefixWriter{mu: mu, out: stdout, prefix: prefix},
		stderr: &prefixWriter{mu: mu, out: stderr, prefix: prefix}}
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n.PID = cmd.Process.Pid
	go func() {
		c.err = cmd.Wait()
		c.stdout.flush()
		c.stderr.flush()
		close(c.done)
	}()
	return c, nil
}

// signal sends sig to the child unless it has exited.
func (c *child) signal(sig os.Signal) {
	select {
	case <-c.done:
	default:
		c.cmd.Process.Signal(sig)
	}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

package dev

import "syscall"

// childAttr puts a node in its own process group (so a terminal's Ctrl-C
// reaches felix dev only) and, on Linux, has the kernel send it SIGTERM
// should felix dev die without stopping it (kill -9, a crash), so no
// orphaned node keeps the cluster's ports. The death signal follows the
// thread that started the child; Go keeps its threads for the life of
// the process unless a goroutine locked to one exits, which felix dev
// never does.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

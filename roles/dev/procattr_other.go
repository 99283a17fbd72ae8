//go:build !linux

package dev

import "syscall"

// childAttr puts a node in its own process group, so a terminal's Ctrl-C
// reaches felix dev only.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

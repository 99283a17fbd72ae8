package cli

import "golang.org/x/sys/unix"

// ioctlReadTermios is the ioctl that reads a terminal's settings (isTerminal).
const ioctlReadTermios = unix.TCGETS

package log

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocate reserves [off, off+size) of f without changing its size.
func allocate(f *os.File, off, size int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, size)
}

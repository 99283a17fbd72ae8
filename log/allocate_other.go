//go:build !linux

package log

import (
	"errors"
	"os"
)

// errNoAllocate says the system reserves no space ahead of writes here:
// a log then writes each append at once.
var errNoAllocate = errors.New("log: no space reservation on this system")

// allocate is unsupported outside Linux.
func allocate(*os.File, int64, int64) error { return errNoAllocate }

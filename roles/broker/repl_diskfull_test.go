package broker

import (
	"bytes"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	flog "github.com/felixmq/felix/log"
)

// fullDiskFS fails every write with ENOSPC while full is set, after
// part of it landed (as a disk that fills mid-write does).
type fullDiskFS struct {
	flog.FS
	full    atomic.Bool
	refused atomic.Int64 // writes refused
}

func (f *fullDiskFS) OpenFile(name string, flag int, perm os.FileMode) (flog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &fullDiskFile{File: file, fs: f}, nil
}

type fullDiskFile struct {
	flog.File
	fs *fullDiskFS
}

func (f *fullDiskFile) Write(p []byte) (int, error) {
	if f.fs.full.Load() {
		f.fs.refused.Add(1)
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: "segment", Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

// A follower whose disk fills up stops holding new records; the leader
// and the other follower keep the majority, so Quorum publishes go on
// being acknowledged, and once space returns the follower catches up
// with a copy equal to the leader's, with nothing torn or repeated.
func TestAFollowerWhoseDiskFillsCatchesUpOnceSpaceReturns(t *testing.T) {
	disk := &fullDiskFS{FS: flog.OSFS()}
	envs := startReplicated(t, "df", "quorum", func(c *Config) {
		c.Durable.Fsync = "always"
		if c.Node.ID == "broker-c" {
			c.Durable.fs = disk
		}
	})
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "df", 0, 10)
	waitReplicated(t, envs[2], "df", 10)

	disk.full.Store(true)
	publishAcked(t, s, "df", 10, 100)
	waitFor(t, "broker-c's disk to refuse a write", func() bool { return disk.refused.Load() > 0 })
	disk.full.Store(false)
	publishAcked(t, s, "df", 110, 10)
	waitReplicated(t, envs[2], "df", 120)
	got := replicaRecords(t, envs[2], "df")
	if len(got) != 120 {
		t.Fatalf("c holds %d records, want 120", len(got))
	}
	for i, r := range got {
		if r.Offset != uint64(i) || !bytes.Equal(r.Payload, numbered(i)) {
			t.Fatalf("record %d: offset %d payload %q", i, r.Offset, r.Payload)
		}
	}
}

package log_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	flog "github.com/felixmq/felix/log"
)

func Example() {
	dir, _ := os.MkdirTemp("", "felix-log-example")
	defer os.RemoveAll(dir)

	l, rep, err := flog.Open(flog.Options{Dir: filepath.Join(dir, "shard-0"), Fsync: flog.FsyncAlways})
	if err != nil {
		fmt.Println("refused:", err) // a *CorruptionError names the segment and position
		return
	}
	fmt.Println("recovery:", rep.Verdict)

	a, err := l.Append([][]byte{[]byte("hello"), []byte("world")}, "alice")
	if err != nil {
		fmt.Println(err) // errors.Is(err, flog.ErrNoSpace) on a full disk
		return
	}
	if err := l.Wait(context.Background(), a); err != nil { // fsynced once this returns
		fmt.Println(err)
		return
	}
	recs, next, _ := l.Read(0, a.Base+uint64(a.Count), 100, 1<<20)
	for _, r := range recs {
		fmt.Println(r.Offset, r.Publisher, string(r.Payload))
	}
	fmt.Println("next:", next)
	if err := l.Close(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// recovery: open
	// 0 alice hello
	// 1 alice world
	// next: 2
}

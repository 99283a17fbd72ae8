package log

import (
	"context"
	"sync"
	"testing"
)

// benchAppend runs b.N appends of one 4 KiB record, each followed by Wait,
// spread over the given number of goroutines.
func benchAppend(b *testing.B, policy FsyncPolicy, goroutines int) {
	o := Options{Dir: b.TempDir(), Fsync: policy, SegmentBytes: 16 << 20,
		Retention: Retention{MaxBytes: 64 << 20}, Logger: quietLogger()}
	l, _, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	p := make([]byte, 4096)
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range goroutines {
		n := b.N / goroutines
		if g < b.N%goroutines {
			n++
		}
		wg.Go(func() {
			for range n {
				a, err := l.Append([][]byte{p}, "bench")
				if err == nil {
					err = l.Wait(context.Background(), a)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	st := l.Stats()
	b.ReportMetric(float64(st.Fsyncs)/float64(max(1, st.Appends)), "fsyncs/append")
}

func BenchmarkAppendAlways1(b *testing.B)    { benchAppend(b, FsyncAlways, 1) }
func BenchmarkAppendAlways64(b *testing.B)   { benchAppend(b, FsyncAlways, 64) }
func BenchmarkAppendPeriodic1(b *testing.B)  { benchAppend(b, FsyncPeriodic, 1) }
func BenchmarkAppendPeriodic64(b *testing.B) { benchAppend(b, FsyncPeriodic, 64) }

func BenchmarkRead(b *testing.B) {
	o := Options{Dir: b.TempDir(), Fsync: FsyncNone, Logger: quietLogger()}
	l, _, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	p := make([]byte, 1024)
	for range 1000 {
		l.Append([][]byte{p, p, p, p}, "")
	}
	b.SetBytes(100 * 1024)
	b.ResetTimer()
	for i := range b.N {
		from := uint64(i*100) % 3900
		if recs, _, err := l.Read(from, from+100, 100, 0); err != nil || len(recs) != 100 {
			b.Fatal(len(recs), err)
		}
	}
}

package tcptr

import (
	"io"
	"testing"

	"github.com/felixmq/felix/transport"
)

// benchPair is a dialled and an accepted connection on loopback.
func benchPair(b *testing.B) (cli, srv transport.Conn) {
	stls, ctls := testTLS(b)
	ln := listen(b, stls, transport.Config{})
	ctx := ctxT(b)
	cli, err := Dial(ctx, ln.Addr().String(), ctls, transport.Config{})
	if err != nil {
		b.Fatal(err)
	}
	srv, err = ln.Accept(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cli.CloseWithError(0, "")
		srv.CloseWithError(0, "")
	})
	return cli, srv
}

// BenchmarkStreamRoundTrip is a 100-byte request and a 100-byte reply,
// on a new stream each time (as a one-shot call) or on one long-lived
// stream (as a control stream's request and answer).
func BenchmarkStreamRoundTrip(b *testing.B) {
	req := make([]byte, 100)
	b.Run("new-stream", func(b *testing.B) {
		cli, srv := benchPair(b)
		ctx := ctxT(b)
		go func() {
			for {
				st, err := srv.AcceptStream(ctx)
				if err != nil {
					return
				}
				go func() {
					buf, _ := io.ReadAll(st)
					st.Write(buf)
					st.Close()
				}()
			}
		}()
		buf := make([]byte, 200)
		b.ReportAllocs()
		for b.Loop() {
			st, err := cli.OpenStreamSync(ctx)
			if err != nil {
				b.Fatal(err)
			}
			st.Write(req)
			st.Close()
			if n, err := io.ReadFull(st, buf[:100]); err != nil || n != 100 {
				b.Fatal(n, err)
			}
			if _, err := st.Read(buf); err != io.EOF {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-stream", func(b *testing.B) {
		cli, srv := benchPair(b)
		ctx := ctxT(b)
		go func() {
			st, err := srv.AcceptStream(ctx)
			if err != nil {
				return
			}
			buf := make([]byte, 100)
			for {
				if _, err := io.ReadFull(st, buf); err != nil {
					return
				}
				if _, err := st.Write(buf); err != nil {
					return
				}
			}
		}()
		st, err := cli.OpenStreamSync(ctx)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 100)
		b.ReportAllocs()
		for b.Loop() {
			st.Write(req)
			if _, err := io.ReadFull(st, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkThroughput writes 64 KiB at a time on one stream.
func BenchmarkThroughput(b *testing.B) {
	cli, srv := benchPair(b)
	ctx := ctxT(b)
	done := make(chan int64, 1)
	go func() {
		st, err := srv.AcceptStream(ctx)
		if err != nil {
			done <- 0
			return
		}
		n, _ := io.Copy(io.Discard, st)
		done <- n
	}()
	st, err := cli.OpenStreamSync(ctx)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	<-done
}

package broker

import (
	"context"
	"io"
	"testing"

	"github.com/felixmq/felix/wire"
)

// BenchmarkPublishFanout measures binary fire-and-forget batches of 64
// payloads of 100 bytes through one broker to two subscribers. Each
// iteration is one batch; the run ends when both subscribers have it all.
func BenchmarkPublishFanout(b *testing.B) {
	b.StopTimer()
	e := startEnv(b, testConfig(), wire.StreamSpec{Stream: "bench", SubQueuePolicy: "block"})
	qc := e.dial(0)
	subs := []*tsub{
		e.subscribe(qc, e.authed(qc, wire.FlagBinaryEventBatchShared, allFeatures, pubAll), "bench"),
		e.subscribe(qc, e.authed(qc, wire.FlagBinaryEventBatchShared, allFeatures, pubAll), "bench"),
	}
	pub := e.authed(e.dial(0), 0, allFeatures, pubAll)
	payloads := make([][]byte, 64)
	for i := range payloads {
		payloads[i] = make([]byte, 100)
	}
	frame := binPublish("bench", false, 0, payloads...)
	b.SetBytes(int64(64 * 100))
	errs := make(chan error, len(subs))
	b.StartTimer()
	for _, s := range subs {
		go func() {
			_, err := s.read(64 * b.N)
			errs <- err
		}()
	}
	for i := 0; i < b.N; i++ {
		pub.write(frame)
	}
	for range subs {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkControlStreamEnd is the writer's life on a control stream that
// carried no acked publish, such as a subscribe's or a cache watch's.
func BenchmarkControlStreamEnd(b *testing.B) {
	ctx := context.Background()
	owed := newServerMetrics().outAckDepth
	for b.Loop() {
		sw := newStreamWriter(io.Discard, 1024, owed, func(error) {})
		if err := sw.waitOwed(ctx); err != nil {
			b.Fatal(err)
		}
		sw.stop()
	}
}

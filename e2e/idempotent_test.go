package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// An IdempotentProducer publishes numbered batches to a durable stream
// while the broker is killed with SIGKILL and restarted three times. Its
// batches in doubt at each kill are sent again, under the same sequences,
// to the restarted broker, which rebuilt its producer table from the log:
// every batch is in the log exactly once, in order, at the offset its
// answer named. Over QUIC the client goes through a UDP proxy that drops
// the broker's answers for a moment before each kill, so batches are
// written and unanswered when the broker dies, and the restarted brokers
// must answer their re-sends from the rebuilt tables.
func TestIdempotentProducerExactlyOnceThroughSIGKILL(t *testing.T) {
	dir := t.TempDir()
	addr := freeUDPAddr(t)
	env := []string{"FELIX_DURABLE_FSYNC=always"}
	n := startServeOn(t, dir, addr, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "exactly", "--durable")
	cfg := n.sdkConfig(n.adminToken())
	cfg.DialTimeout = 2 * time.Second
	var blackhole atomic.Bool
	var proxy *udpProxy
	if e2eTransport != felix.TransportTCP {
		proxy = newUDPProxy(t, addr)
		proxy.drop = func(toServer bool) bool { return !toServer && blackhole.Load() }
		cfg.Addr, cfg.ServerName = proxy.addr(), "127.0.0.1"
		cfg.KeepAlive, cfg.MaxIdleTimeout = 200*time.Millisecond, 1500*time.Millisecond
	}
	c := connectServing(t, ctx, cfg, "exactly")
	p, err := c.IdempotentProducer(ctx)
	if err != nil {
		t.Fatal(err)
	}

	const batches = 600
	nb := produceNumbered(ctx, p, "default", "exactly", batches, 20)
	// Re-sends answered from a restarted broker's producer table (the
	// first broker's count is of re-sends before any kill).
	var dups float64
	for kill := 1; kill <= 3; kill++ {
		target := int64(kill * batches / 4)
		eventually(t, 60*time.Second, fmt.Sprintf("%d batches before kill %d", target, kill), func() bool {
			select {
			case <-nb.finished:
				return true
			default:
			}
			return nb.done.Load() >= target
		})
		if proxy != nil {
			blackhole.Store(true) // batches still land; their answers do not
			time.Sleep(300 * time.Millisecond)
		}
		if kill > 1 {
			dups += max(0, n.metric("felix_idempotent_duplicates_total"))
		}
		if err := n.stop(syscall.SIGKILL, 10*time.Second); err != nil {
			t.Logf("kill %d: %v", kill, err)
		}
		n = startServeOn(t, dir, addr, env...)
		blackhole.Store(false)
	}
	offsets := nb.wait(ctx, t)
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	if err := p.Close(cctx); err != nil {
		t.Fatalf("close: %v", err)
	}

	reader := n.connect(ctx, n.adminToken())
	recs := readAll(ctx, t, reader, "exactly", 0)
	checkNumbered(t, recs, offsets)
	dups += max(0, n.metric("felix_idempotent_duplicates_total"))
	t.Logf("%d batches through 3 kills; the restarted brokers answered %v re-sends from their producer tables", batches, dups)
	if proxy != nil && dups < 1 {
		t.Fatal("no re-send was answered from a rebuilt producer table: the answer blackouts put nothing in doubt")
	}
}

// The same through a UDP proxy that loses 3% of datagrams, delays the
// rest and, three times mid-publish, drops every answer until the
// connection dies: the batches written but unanswered are sent again on
// a new connection and answered from the producer table, and every batch
// is in the log exactly once, in order.
func TestIdempotentProducerExactlyOnceThroughALossyLink(t *testing.T) {
	if e2eTransport == felix.TransportTCP {
		t.Skip("the UDP proxy carries QUIC only; TCP is covered by the SIGKILL test")
	}
	n := startServe(t, "FELIX_DURABLE_FSYNC=always")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "lossy", "--durable")
	proxy := newUDPProxy(t, n.client.BrokerAddr)
	var blackhole atomic.Bool
	loss := lossy(0.03, 11)
	proxy.drop = func(toServer bool) bool { return (!toServer && blackhole.Load()) || loss(toServer) }
	proxy.delay = func(bool) time.Duration { return time.Duration(time.Now().UnixNano()%2000) * time.Microsecond }
	cfg := n.sdkConfig(n.adminToken())
	cfg.Addr, cfg.ServerName = proxy.addr(), "127.0.0.1"
	cfg.DialTimeout, cfg.KeepAlive, cfg.MaxIdleTimeout = 2*time.Second, 200*time.Millisecond, 1500*time.Millisecond
	c := connectServing(t, ctx, cfg, "lossy")
	p, err := c.IdempotentProducer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const batches = 400
	payload := func(i int) string { return fmt.Sprintf("lossy-%04d", i) }
	var done atomic.Int64
	var offsets []uint64
	var pubErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for from := 0; from < batches; from += 10 {
			var bs [][][]byte
			for i := from; i < from+10; i++ {
				bs = append(bs, [][]byte{[]byte(payload(i))})
			}
			offs, err := p.PublishBatches(ctx, "default", "lossy", bs)
			offsets = append(offsets, offs...)
			if err != nil {
				pubErr = err
				return
			}
			done.Add(int64(len(offs)))
		}
	}()
	for phase := 1; phase <= 3; phase++ {
		target := int64(phase * batches / 4)
		eventually(t, 60*time.Second, fmt.Sprintf("%d batches before blackout %d", target, phase), func() bool {
			return done.Load() >= target
		})
		blackhole.Store(true)
		time.Sleep(2500 * time.Millisecond) // past the client's idle timeout
		blackhole.Store(false)
	}
	select {
	case <-finished:
	case <-ctx.Done():
		t.Fatalf("the producer did not finish: %d batches answered", done.Load())
	}
	if pubErr != nil {
		t.Fatalf("publish: %v", pubErr)
	}
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	if err := p.Close(cctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	reader := n.connect(ctx, n.adminToken())
	recs := readAll(ctx, t, reader, "lossy", 0)
	if len(recs) != batches {
		t.Fatalf("the log holds %d records, want %d (each batch once)", len(recs), batches)
	}
	for i, r := range recs {
		if string(r.Payload) != payload(i) || r.Offset != offsets[i] {
			t.Fatalf("record %d: %q at %d, want %q at %d", i, r.Payload, r.Offset, payload(i), offsets[i])
		}
	}
	dups := n.metric("felix_idempotent_duplicates_total")
	if dups < 1 {
		t.Fatalf("no batch was answered from the producer table (%v): the blackouts put none in doubt", dups)
	}
	t.Logf("%d batches, %d datagrams dropped, %v re-sends answered from the producer table", batches, proxy.dropped.Load(), dups)
}

// connectServing connects with cfg, retrying while the broker (or the
// proxy before it) is not there yet, and waits until stream is served.
// The client is closed when the test ends.
func connectServing(t *testing.T, ctx context.Context, cfg felix.Config, stream string) *felix.Client {
	t.Helper()
	var c *felix.Client
	eventually(t, 20*time.Second, "connect", func() bool {
		var err error
		c, err = felix.Connect(ctx, cfg)
		return err == nil
	})
	t.Cleanup(func() { c.Close() })
	eventually(t, 15*time.Second, "stream "+stream+" to be served", func() bool {
		_, err := c.Read(ctx, "default", stream, 0, 0, nil, 0)
		return err == nil
	})
	return c
}

// numberedBatches publishes batches numbered two-record batches (payloads
// batchPayload(i, 0) and (i, 1)) to one stream through an idempotent
// producer, chunk batches to a PublishBatches call, from a goroutine of
// its own; it stops at the first error.
type numberedBatches struct {
	done     atomic.Int64 // batches answered
	finished chan struct{}

	mu      sync.Mutex
	offsets []uint64 // the first record's offset of each answered batch
	err     error
}

func batchPayload(i, r int) string { return fmt.Sprintf("batch-%04d-%d", i, r) }

func produceNumbered(ctx context.Context, p *felix.IdempotentProducer, ns, stream string, batches, chunk int) *numberedBatches {
	nb := &numberedBatches{finished: make(chan struct{})}
	go func() {
		defer close(nb.finished)
		for from := 0; from < batches; from += chunk {
			var bs [][][]byte
			for i := from; i < from+chunk; i++ {
				bs = append(bs, [][]byte{[]byte(batchPayload(i, 0)), []byte(batchPayload(i, 1))})
			}
			offs, err := p.PublishBatches(ctx, ns, stream, bs)
			nb.mu.Lock()
			nb.offsets = append(nb.offsets, offs...)
			if err != nil {
				nb.err = fmt.Errorf("batches from %d: %w", from, err)
			}
			nb.mu.Unlock()
			if err != nil {
				return
			}
			nb.done.Add(int64(len(offs)))
		}
	}()
	return nb
}

// wait waits for the producer to finish and returns each batch's
// answered offset, failing t if it did not finish or failed.
func (nb *numberedBatches) wait(ctx context.Context, t *testing.T) []uint64 {
	t.Helper()
	select {
	case <-nb.finished:
	case <-ctx.Done():
		t.Fatalf("the producer did not finish: %d batches answered", nb.done.Load())
	}
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if nb.err != nil {
		t.Fatalf("publish: %v", nb.err)
	}
	return nb.offsets
}

// checkNumbered fails t unless recs are the batches exactly once, in
// order, each at its answered offset; it returns how many gaps there are
// between consecutive batches.
func checkNumbered(t *testing.T, recs []felix.Record, offsets []uint64) (gaps int) {
	t.Helper()
	batches := len(offsets)
	if len(recs) != 2*batches {
		t.Fatalf("the log holds %d records, want %d (each of %d batches once)", len(recs), 2*batches, batches)
	}
	for i := range batches {
		for r := range 2 {
			if got := recs[2*i+r]; string(got.Payload) != batchPayload(i, r) {
				t.Fatalf("record %d is %q, want %q", 2*i+r, got.Payload, batchPayload(i, r))
			}
		}
		if recs[2*i].Offset != offsets[i] {
			t.Fatalf("batch %d is at offset %d, its answer said %d", i, recs[2*i].Offset, offsets[i])
		}
		if i > 0 && recs[2*i].Offset != recs[2*i-1].Offset+1 {
			gaps++
		}
	}
	return gaps
}

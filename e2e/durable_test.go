package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/freeport"
	"github.com/felixmq/felix/sdk/felix"
)

// ackedRecord is a publish the broker acknowledged, with where it landed.
type ackedRecord struct {
	payload string
	offset  uint64
}

// publishUntilKilled runs acked publishers against n until ctx ends and
// returns every acknowledgement they got.
func publishUntilKilled(ctx context.Context, t *testing.T, c *felix.Client, stream string, cycle, publishers int) []ackedRecord {
	var mu sync.Mutex
	var acked []ackedRecord
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				payload := fmt.Sprintf("c%d-p%d-%d", cycle, p, seq)
				res, err := c.PublishAcked(ctx, "default", stream, []byte(payload), felix.AckPerMessage)
				if err != nil {
					return
				}
				if !res.HasOffset {
					t.Errorf("ack of %s carries no offset", payload)
					return
				}
				mu.Lock()
				acked = append(acked, ackedRecord{payload, res.Offset})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

// readAll reads a durable shard from offset 0 to its tail.
func readAll(ctx context.Context, t *testing.T, c *felix.Client, stream string, shard uint32) []felix.Record {
	t.Helper()
	return readFrom(ctx, t, c, stream, shard, 0)
}

// readFrom reads a durable shard from offset from to its tail.
func readFrom(ctx context.Context, t *testing.T, c *felix.Client, stream string, shard uint32, from uint64) []felix.Record {
	t.Helper()
	var out []felix.Record
	for {
		page, err := c.Read(ctx, "default", stream, shard, from, nil, 0)
		if err != nil {
			t.Fatalf("read %s from %d: %v", stream, from, err)
		}
		if len(page.Records) == 0 {
			return out
		}
		out = append(out, page.Records...)
		from = page.NextOffset
	}
}

// checkLog checks the shard holds contiguous offsets from 0, no payload
// twice, and every acknowledged publish at the offset its ack named.
func checkLog(t *testing.T, recs []felix.Record, acked []ackedRecord) {
	t.Helper()
	at := map[string]uint64{}
	for i, r := range recs {
		if r.Offset != uint64(i) {
			t.Fatalf("record %d has offset %d: offsets are not contiguous", i, r.Offset)
		}
		p := string(r.Payload)
		if _, dup := at[p]; dup {
			t.Fatalf("payload %s is in the log twice", p)
		}
		at[p] = r.Offset
	}
	for _, a := range acked {
		off, ok := at[a.payload]
		if !ok {
			t.Fatalf("acknowledged publish %s (offset %d) is missing after the crash; log has %d records", a.payload, a.offset, len(recs))
		}
		if off != a.offset {
			t.Fatalf("acknowledged publish %s is at %d, its ack said %d", a.payload, off, a.offset)
		}
	}
}

// Acked publishes survive the broker being killed with SIGKILL at random
// points: under fsync always and under periodic (a process kill leaves the
// page cache, which periodic relies on).
func TestAckedPublishesSurviveSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		fsync  string
		cycles int
	}{{"always", 4}, {"periodic", 3}} {
		t.Run(tc.fsync, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"FELIX_DURABLE_FSYNC=" + tc.fsync, "FELIX_DURABLE_SEGMENT_BYTES=65536"}
			rng := rand.New(rand.NewPCG(uint64(len(tc.fsync)), 7))
			var acked []ackedRecord
			for cycle := range tc.cycles {
				n := startServeIn(t, dir, env...)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				if cycle == 0 {
					n.mustFelix(ctx, "admin", "stream", "create", "crash", "--durable")
				}
				c := n.connect(ctx, n.adminToken())
				eventually(t, 10*time.Second, "the durable stream to be served", func() bool {
					_, err := c.PublishAcked(ctx, "default", "crash", []byte(fmt.Sprintf("probe-%d", cycle)), felix.AckPerMessage)
					return err == nil
				})
				loadCtx, stopLoad := context.WithCancel(ctx)
				killAfter := time.Duration(100+rng.IntN(400)) * time.Millisecond
				go func() {
					time.Sleep(killAfter)
					n.stop(syscall.SIGKILL, 10*time.Second)
					stopLoad()
				}()
				acked = append(acked, publishUntilKilled(loadCtx, t, c, "crash", cycle, 8)...)
				n.stop(syscall.SIGKILL, 10*time.Second)
				c.Close()
				cancel()
			}
			n := startServeIn(t, dir, env...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c := n.connect(ctx, n.adminToken())
			recs := readAll(ctx, t, c, "crash", 0)
			if len(acked) == 0 {
				t.Fatal("no publish was acknowledged before the kills")
			}
			checkLog(t, recs, acked)
			t.Logf("%d acknowledged publishes over %d kills; the log holds %d records", len(acked), tc.cycles, len(recs))
		})
	}
}

// shardLogDir is where felix serve keeps one shard's log.
func shardLogDir(n *node, stream string, shard int) string {
	return n.dataFile(filepath.Join("log", "streams", n.client.Tenant, n.client.Namespace, stream, fmt.Sprint(shard)))
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no segments in %s (%v)", dir, err)
	}
	return m
}

// A torn tail is cut and reported; a flipped bit inside a sealed segment
// refuses that shard, names where, and leaves the other shard serving;
// `felix inspect segments` reaches the same verdicts without a broker.
func TestTornTailAndCorruptSegmentVerdicts(t *testing.T) {
	dir := t.TempDir()
	env := []string{"FELIX_DURABLE_SEGMENT_BYTES=4096"}
	n := startServeIn(t, dir, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "disk", "--durable", "--shards", "2")
	c := n.connect(ctx, n.adminToken())
	perShard := map[uint32]int{}
	eventually(t, 10*time.Second, "both shards to hold records", func() bool {
		for i := range 40 {
			key := []byte(fmt.Sprint("k", i))
			res, err := c.PublishKeyedAcked(ctx, "default", "disk", key, make([]byte, 300), felix.AckPerMessage)
			if err != nil {
				return false
			}
			_ = res
		}
		for s := range uint32(2) {
			perShard[s] = len(readAll(ctx, t, c, "disk", s))
		}
		return perShard[0] > 20 && perShard[1] > 20
	})
	c.Close()
	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// Shard 1: garbage after its last record.
	segs1 := segmentFiles(t, shardLogDir(n, "disk", 1))
	f, err := os.OpenFile(segs1[len(segs1)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 1, 7, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3})
	f.Close()
	out, _, code := n.felix(ctx, "inspect", "segments", "--data-dir", "felix-data")
	if code != 0 || !strings.Contains(out, "truncate") {
		t.Fatalf("inspect after a torn tail: exit %d\n%s", code, out)
	}

	// Shard 0: one flipped bit in its first, sealed, segment.
	segs0 := segmentFiles(t, shardLogDir(n, "disk", 0))
	if len(segs0) < 2 {
		t.Fatalf("shard 0 has %d segments; the test needs a sealed one", len(segs0))
	}
	data, err := os.ReadFile(segs0[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	if err := os.WriteFile(segs0[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code = n.felix(ctx, "inspect", "segments", "--data-dir", "felix-data")
	if code != 2 || !strings.Contains(out, "refuse") || !strings.Contains(out, filepath.Base(segs0[0])) {
		t.Fatalf("inspect after a flipped bit: exit %d, want 2 naming %s\n%s", code, filepath.Base(segs0[0]), out)
	}

	m := startServeIn(t, dir, env...)
	c = m.connect(ctx, m.adminToken())
	if got := len(readAll(ctx, t, c, "disk", 1)); got != perShard[1] {
		t.Fatalf("shard 1 holds %d records after its tail was cut, want %d", got, perShard[1])
	}
	_, err = c.Read(ctx, "default", "disk", 0, 0, nil, 0)
	var be *felix.BrokerError
	if !errors.As(err, &be) || be.Code != "shard_unavailable" {
		t.Fatalf("read of the refused shard: %v", err)
	}
	if !strings.Contains(m.stderr.String()+m.stdout.String(), filepath.Base(segs0[0])) {
		t.Error("the broker's log does not name the damaged segment")
	}
}

// freeUDPAddr returns a loopback address whose port nobody uses right
// now on UDP or on TCP: a broker binds it for QUIC and for TLS over TCP.
func freeUDPAddr(t *testing.T) string {
	t.Helper()
	port, err := freeport.Pick(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// collect reads n events from sub and checks their offsets continue from
// next with no gap and no duplicate.
func collect(ctx context.Context, t *testing.T, sub *felix.ClusterSubscription, next uint64, n int) uint64 {
	t.Helper()
	for range n {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("next at offset %d: %v", next, err)
		}
		if !ev.HasOffset || ev.Offset != next {
			t.Fatalf("event at offset %d (has %v), want %d", ev.Offset, ev.HasOffset, next)
		}
		next++
	}
	return next
}

// a_subscription_resumes_after_its_broker_is_killed: a ClusterClient
// subscription on a durable stream resubscribes after the last offset it
// delivered once its broker is back.
func TestSubscriptionResumesAfterItsBrokerIsKilled(t *testing.T) {
	dir := t.TempDir()
	addr := freeUDPAddr(t)
	n := startServeOn(t, dir, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "orders", "--durable")
	cfg := n.sdkConfig(n.adminToken())
	cc, err := felix.ConnectCluster(ctx, []string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	publish := func(from, count int) {
		t.Helper()
		for i := from; i < from+count; i++ {
			if _, err := cc.PublishAcked(ctx, "default", "orders", []byte(fmt.Sprint(i)), felix.AckPerMessage); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	eventually(t, 10*time.Second, "the stream to be served", func() bool {
		_, err := cc.PublishAcked(ctx, "default", "orders", []byte("0"), felix.AckPerMessage)
		return err == nil
	})
	sub, err := cc.SubscribeFrom(ctx, "default", "orders", felix.SubscribeOptions{Start: felix.Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publish(1, 49)
	next := collect(ctx, t, sub, 0, 50)

	if err := n.stop(syscall.SIGKILL, 10*time.Second); err != nil && !strings.Contains(err.Error(), "killed") {
		t.Fatalf("kill: %v", err)
	}
	m := startServeOn(t, dir, addr)
	// Publish through a fresh connection: an acked publish caught on the
	// killed connection is outcome_unknown, which is not the point here.
	pub := m.connect(ctx, m.adminToken())
	for i := 50; i < 100; i++ {
		if _, err := pub.PublishAcked(ctx, "default", "orders", []byte(fmt.Sprint(i)), felix.AckPerMessage); err != nil {
			t.Fatalf("publish %d after the restart: %v", i, err)
		}
	}
	collect(ctx, t, sub, next, 50)
	if sub.Resumes() == 0 {
		t.Error("the subscription reports no resume")
	}
}

// A subscriber too slow for its queue is ended with subscription_lagged,
// and the ClusterClient subscription catches up from the log with no gap
// and no duplicate.
func TestLaggedClusterSubscriptionCatchesUpFromTheLog(t *testing.T) {
	n := startServe(t, "FELIX_SUBSCRIBER_QUEUE_CAPACITY=4")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "burst", "--durable")
	cfg := n.sdkConfig(n.adminToken())
	cc, err := felix.ConnectCluster(ctx, []string{n.client.BrokerAddr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	eventually(t, 10*time.Second, "the stream to be served", func() bool {
		_, err := cc.PublishAcked(ctx, "default", "burst", []byte("first"), felix.AckPerMessage)
		return err == nil
	})
	sub, err := cc.SubscribeFrom(ctx, "default", "burst", felix.SubscribeOptions{Start: felix.Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// 40 MiB, far more than the client's stream window (16 MiB) holds,
	// published before the subscriber reads anything: its
	// broker queue (4 batches) has to drop, which ends it as lagged.
	const total, per = 10000, 50
	payload := make([]byte, 4096)
	for i := 1; i < total; i += per {
		batch := make([][]byte, 0, per)
		for j := i; j < min(i+per, total); j++ {
			batch = append(batch, payload)
		}
		if err := cc.PublishBatch(ctx, "default", "burst", batch, felix.AckPerBatch); err != nil {
			t.Fatal(err)
		}
	}
	collect(ctx, t, sub, 0, total)
	if sub.Resumes() == 0 {
		t.Fatal("the subscription never lagged, so the test proved nothing")
	}
	if lagged := n.metric("felix_subscriptions_lagged_total"); lagged < 1 {
		t.Errorf("resumed %d times but felix_subscriptions_lagged_total is %v", sub.Resumes(), lagged)
	}
}

// createDurable creates a durable stream and publishes payloads to it
// (acknowledged) once the broker serves it.
func createDurable(ctx context.Context, t *testing.T, n *node, stream string, payloads ...string) {
	t.Helper()
	n.mustFelix(ctx, "admin", "stream", "create", stream, "--durable")
	eventually(t, 10*time.Second, "the durable stream to take a publish", func() bool {
		_, _, code := n.felix(ctx, append([]string{"pub", stream, "--ack"}, payloads...)...)
		return code == 0
	})
}

// The README's durable tour: records published before a restart are read
// back and replayed from an offset by the CLI afterwards.
func TestDurableTourSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := startServeIn(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createDurable(ctx, t, n, "audit", "one", "two", "three")
	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	m := startServeIn(t, dir)
	if out := m.mustFelix(ctx, "read", "audit"); strings.Fields(out) == nil || strings.Join(strings.Fields(out), " ") != "one two three" {
		t.Fatalf("felix read after a restart printed %q", out)
	}
	if out := m.mustFelix(ctx, "sub", "audit", "--from", "1", "--count", "2"); strings.Join(strings.Fields(out), " ") != "two three" {
		t.Fatalf("felix sub --from 1 printed %q", out)
	}
}

// Tightening a live stream's retention through the control plane deletes
// its old segments without a restart, and a resume below them is refused
// as too_old naming the oldest retained offset.
func TestRetentionChangeOnALiveStream(t *testing.T) {
	n := startServe(t, "FELIX_DURABLE_SEGMENT_BYTES=8192", "FELIX_DURABLE_RETENTION_CHECK_MS=50")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "metrics", "--durable")
	c := n.connect(ctx, n.adminToken())
	eventually(t, 10*time.Second, "the stream to be served", func() bool {
		_, err := c.PublishAcked(ctx, "default", "metrics", make([]byte, 1000), felix.AckPerMessage)
		return err == nil
	})
	for range 99 {
		if _, err := c.PublishAcked(ctx, "default", "metrics", make([]byte, 1000), felix.AckPerMessage); err != nil {
			t.Fatal(err)
		}
	}
	if recs := readAll(ctx, t, c, "metrics", 0); len(recs) != 100 {
		t.Fatalf("before the change the log holds %d records", len(recs))
	}
	n.mustFelix(ctx, "admin", "stream", "update", "metrics", "--retention-bytes", "20000")
	var oldest uint64
	eventually(t, 15*time.Second, "retention to delete old segments", func() bool {
		_, err := c.Read(ctx, "default", "metrics", 0, 0, nil, 1)
		var ce *felix.SubscribeCursorError
		if errors.As(err, &ce) && ce.TooOld {
			oldest = ce.Available
			return true
		}
		return false
	})
	if oldest == 0 || oldest >= 100 {
		t.Fatalf("oldest retained offset %d", oldest)
	}
	_, err := c.SubscribeFrom(ctx, "default", "metrics", felix.SubscribeOptions{Start: felix.AtOffset(0)})
	var ce *felix.SubscribeCursorError
	if !errors.As(err, &ce) || !ce.TooOld || ce.Available != oldest || ce.Requested != 0 {
		t.Fatalf("subscribe below retention: %v (oldest %d)", err, oldest)
	}
	if recs := readFrom(ctx, t, c, "metrics", 0, oldest); len(recs) != int(100-oldest) {
		t.Fatalf("from the oldest retained offset %d the log holds %d records", oldest, len(recs))
	}
}

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// Several clients, each on its own connection, race put_if absent on one
// key of the real broker: exactly one wins; the version every client is
// told and every reader sees is the offset of the winning put (as a watch
// reports it); a delete_if with a stale version is refused with the
// current one, and the CLI's conditional forms agree.
func TestCachePutIfAbsentHasExactlyOneWinner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, c := watchNode(t, ctx, t.TempDir(), "leases")
	w, err := c.WatchCache(ctx, "default", "leases", felix.WatchKey("endpoint-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	const clients = 8
	conns := make([]*felix.Client, clients)
	for i := range conns {
		conns[i] = n.connect(ctx, n.adminToken())
	}
	results := make([]felix.CondResult, clients)
	errs := make([]error, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, cl := range conns {
		wg.Go(func() {
			<-start
			results[i], errs[i] = cl.CachePutIf(ctx, "default", "leases", "endpoint-7", []byte(fmt.Sprintf("client-%d", i)), time.Minute, felix.IfAbsent())
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i, errs[i])
		}
		if !r.HasVersion {
			t.Fatalf("client %d: no version in %+v", i, r)
		}
		if r.Applied {
			if winner >= 0 {
				t.Fatalf("clients %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no client won")
	}
	version := results[winner].Version
	for i, r := range results {
		if r.Version != version {
			t.Fatalf("client %d was told version %d, the winner wrote %d", i, r.Version, version)
		}
	}
	it := nextItem(t, ctx, w)
	if it.Op != "put" || it.Offset != version || string(it.Value) != fmt.Sprintf("client-%d", winner) {
		t.Fatalf("watch saw %+v, want the winner's put at offset %d", it, version)
	}
	for i, cl := range conns {
		v, ver, found, err := cl.CacheGetVersioned(ctx, "default", "leases", "endpoint-7")
		if err != nil || !found || ver != version || string(v) != fmt.Sprintf("client-%d", winner) {
			t.Fatalf("client %d read %q at %d (%v %v), want the winner's at %d", i, v, ver, found, err, version)
		}
	}

	// A compare-and-set moves the version on; the old one is stale.
	next, err := c.CachePutIf(ctx, "default", "leases", "endpoint-7", []byte("renewed"), time.Minute, felix.IfVersion(version))
	if err != nil || !next.Applied || next.Version <= version {
		t.Fatalf("put_if at the version: %+v %v", next, err)
	}
	if r, err := c.CacheDeleteIf(ctx, "default", "leases", "endpoint-7", version); err != nil || r.Applied || !r.HasVersion || r.Version != next.Version {
		t.Fatalf("stale delete_if: %+v %v, want refused at %d", r, err, next.Version)
	}

	// The CLI: get --versioned, a refused put --if-absent (exit 3, the
	// current version), and delete --if-version.
	out := n.mustFelix(ctx, "cache", "get", "leases", "endpoint-7", "--versioned")
	if want := fmt.Sprintf("%d\nrenewed\n", next.Version); out != want {
		t.Fatalf("get --versioned printed %q, want %q", out, want)
	}
	stdout, stderr, code := n.felix(ctx, "cache", "put", "leases", "endpoint-7", "other", "--if-absent")
	if code != 3 || stdout != "" || !strings.Contains(stderr, strconv.FormatUint(next.Version, 10)) {
		t.Fatalf("refused put --if-absent: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = n.felix(ctx, "cache", "delete", "leases", "endpoint-7", "--if-version", strconv.FormatUint(version, 10))
	if code != 3 || !strings.Contains(stderr, strconv.FormatUint(next.Version, 10)) {
		t.Fatalf("stale delete --if-version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	n.mustFelix(ctx, "cache", "delete", "leases", "endpoint-7", "--if-version", strconv.FormatUint(next.Version, 10))
	if _, _, found, err := c.CacheGetVersioned(ctx, "default", "leases", "endpoint-7"); err != nil || found {
		t.Fatalf("after delete --if-version: found %v, %v", found, err)
	}
	out = n.mustFelix(ctx, "cache", "put", "leases", "endpoint-7", "again", "--if-absent")
	if v, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64); err != nil || v <= next.Version {
		t.Fatalf("put --if-absent printed %q, want a version after %d", out, next.Version)
	}
}

// On a cluster, clients of every broker race put_if absent on one key:
// the brokers that do not own its shard forward theirs, the owner checks
// and writes atomically, and exactly one wins. Every broker then reads
// the winner's version back.
func TestClusterPutIfAbsentHasExactlyOneWinner(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d.createCache(ctx, "leases", 3)
	d.placed(ctx, "--cache", "leases")
	token := d.adminToken()
	var clients []*felix.Client
	for _, n := range d.nodes {
		c := d.connect(ctx, n.Name, token)
		clients = append(clients, c)
		// shard_unavailable (retry) until the broker's view has the
		// cache's placement; a get changes nothing.
		eventually(t, expiryWait, "a get through "+n.Name, func() bool {
			_, _, _, err := c.CacheGetVersioned(ctx, "default", "leases", "warm-up")
			return err == nil
		})
	}
	const perBroker = 3
	type attempt struct {
		r   felix.CondResult
		err error
	}
	results := make([]attempt, len(clients)*perBroker)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		c := clients[i%len(clients)]
		wg.Go(func() {
			<-start
			r, err := c.CachePutIf(ctx, "default", "leases", "lock", []byte(fmt.Sprintf("holder-%d", i)), 0, felix.IfAbsent())
			results[i] = attempt{r, err}
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, a := range results {
		if a.err != nil {
			t.Fatalf("attempt %d: %v", i, a.err)
		}
		if a.r.Applied {
			if winner >= 0 {
				t.Fatalf("attempts %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no attempt won")
	}
	version := results[winner].r.Version
	for i, a := range results {
		if !a.r.HasVersion || a.r.Version != version {
			t.Fatalf("attempt %d told %+v, the winner wrote %d", i, a.r, version)
		}
	}
	forwarded := 0.0
	for _, n := range d.nodes {
		f, err := d.metric(n.Name, "felix_broker_forwarded_cache_ops_total")
		if err != nil {
			t.Fatal(err)
		}
		forwarded += f
	}
	if forwarded < 2*perBroker {
		t.Fatalf("%v cache operations forwarded; the two brokers without the key sent theirs to its owner", forwarded)
	}
	for i, c := range clients {
		v, ver, found, err := c.CacheGetVersioned(ctx, "default", "leases", "lock")
		if err != nil || !found || ver != version || string(v) != fmt.Sprintf("holder-%d", winner) {
			t.Fatalf("through %s: %q at %d (%v %v), want the winner's at %d", d.nodes[i].Name, v, ver, found, err, version)
		}
	}
}

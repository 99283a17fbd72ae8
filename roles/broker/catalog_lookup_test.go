package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/felixmq/felix/wire"
)

// growingSource is a fakeSource whose changes feed carries what add
// appended after the first snapshot, so a test can create a resource "in
// the control plane" while the broker runs.
type growingSource struct {
	*fakeSource
	mu           sync.Mutex
	log          []wire.CatalogItem // seq from 2: the snapshot is seq 1
	kinds        []wire.CatalogKind // kinds[i] is log[i]'s kind
	streamPasses int                // changes of the streams kind served
}

func (g *growingSource) add(kind wire.CatalogKind, it wire.CatalogItem) {
	g.mu.Lock()
	defer g.mu.Unlock()
	it.Seq, it.Op = uint64(len(g.log)+2), wire.OpPut
	g.log, g.kinds = append(g.log, it), append(g.kinds, kind)
}

func (g *growingSource) passes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.streamPasses
}

func (g *growingSource) Changes(ctx context.Context, kind wire.CatalogKind, since uint64) (*wire.CatalogPage, error) {
	if kind == wire.KindRevocations || kind == wire.KindTenants {
		return g.fakeSource.Changes(ctx, kind, since)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if kind == wire.KindStreams {
		g.streamPasses++
	}
	p := &wire.CatalogPage{Kind: kind, Seq: since}
	for i, it := range g.log {
		if g.kinds[i] == kind && it.Seq > since {
			p.Items = append(p.Items, it)
			p.Seq = max(p.Seq, it.Seq)
		}
	}
	return p, nil
}

// startGrowingEnv starts a broker over a growingSource with the catalog
// of startEnv (tenant acme, namespace prod, cache sessions).
func startGrowingEnv(t *testing.T, cfg Config) (*env, *growingSource) {
	t.Helper()
	signer, jwks := testSigner(t)
	fake := &fakeSource{
		tenants:    []wire.Tenant{{TenantID: testTenant}},
		namespaces: []wire.Namespace{{TenantID: testTenant, Namespace: "prod"}},
		caches:     []wire.CacheSpec{{TenantID: testTenant, Namespace: "prod", Cache: "sessions"}},
		jwks:       jwks,
	}
	src := &growingSource{fakeSource: fake}
	tlsCfg, roots := testTLS(t)
	deps := Deps{Catalog: src, TLS: tlsCfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return startServer(t, cfg, deps, signer, roots, fake), src
}

// TestCreatedNameServedWithoutWaitingForSync creates a stream, a cache
// and a namespace with a stream in the catalog after the broker's only
// periodic pass (the next is an hour away) and uses each at once: the
// broker's miss asks the catalog before it answers.
func TestCreatedNameServedWithoutWaitingForSync(t *testing.T) {
	cfg := testConfig()
	cfg.CatalogSyncInterval = time.Hour
	e, src := startGrowingEnv(t, cfg)
	src.add(wire.KindStreams, wire.CatalogItem{Stream: &wire.StreamSpec{TenantID: testTenant, Namespace: "prod", Stream: "events", Shards: 4}})
	src.add(wire.KindCaches, wire.CatalogItem{Cache: &wire.CacheSpec{TenantID: testTenant, Namespace: "prod", Cache: "fresh"}})
	src.add(wire.KindNamespaces, wire.CatalogItem{Namespace: &wire.Namespace{TenantID: testTenant, Namespace: "dev"}})
	src.add(wire.KindStreams, wire.CatalogItem{Stream: &wire.StreamSpec{TenantID: testTenant, Namespace: "dev", Stream: "logs", Shards: 1}})

	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, pubAll, "cache.*:cache:acme/prod")
	// Subscribe first (the first miss), then publish on the same stream.
	sub := e.subscribe(qc, s, "events")
	s.send(&wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "events", Payload: []byte("one"), RequestID: 1, Ack: wire.AckPerMessage})
	if m, ok := s.recv().(*wire.PublishOK); !ok || m.RequestID != 1 {
		t.Fatalf("publish to a stream created just now: %#v", m)
	}
	if got := sub.payloads(1); string(got[0]) != "one" {
		t.Fatalf("subscriber got %q", got)
	}
	s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "fresh", Key: "k", Value: []byte("v"), RequestID: 2})
	if m, ok := s.recv().(*wire.CacheOK); !ok || m.RequestID != 2 {
		t.Fatalf("put to a cache created just now: %#v", m)
	}
	s.send(&wire.Publish{TenantID: testTenant, Namespace: "dev", Stream: "logs", Payload: []byte("x"), RequestID: 3, Ack: wire.AckPerMessage})
	if m, ok := s.recv().(*wire.PublishOK); !ok || m.RequestID != 3 {
		t.Fatalf("publish in a namespace created just now: %#v", m)
	}
}

// TestMissingNameRefusedAfterOneLookup checks a name the catalog does not
// hold is refused with not_found whose detail says the catalog was asked
// (so waiting will not help), and that a burst of such misses shares
// on-demand passes rather than reading the catalog once each.
func TestMissingNameRefusedAfterOneLookup(t *testing.T) {
	cfg := testConfig()
	cfg.CatalogSyncInterval = time.Hour
	e, src := startGrowingEnv(t, cfg)
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, pubAll, "cache.*:cache:acme/prod")
	s.send(&wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "nope"})
	if we := expectCode(t, s.recv(), wire.CodeNotFound); !we.NotInCatalog() {
		t.Fatalf("subscribe: detail %v, want in_catalog false", we.Detail)
	}
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "nope", Key: "k", RequestID: 1})
	if we := expectCode(t, s.recv(), wire.CodeNotFound); !we.NotInCatalog() {
		t.Fatalf("cache get: detail %v", we.Detail)
	}
	s.send(&wire.Publish{TenantID: testTenant, Namespace: "nope", Stream: "x", Payload: []byte("x"), RequestID: 2, Ack: wire.AckPerMessage})
	if we := expectCode(t, s.recv(), wire.CodeNotFound); !we.NotInCatalog() {
		t.Fatalf("publish to a missing namespace: detail %v", we.Detail)
	}

	// Many streams miss at once; they share passes.
	before := src.passes()
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		st := e.authed(qc, 0, allFeatures, pubAll)
		wg.Go(func() {
			st.send(&wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "bogus", Payload: []byte("x"), RequestID: uint64(i), Ack: wire.AckPerMessage})
			if pe, ok := st.recv().(*wire.PublishError); !ok || pe.Code != wire.CodeNotFound {
				t.Errorf("bogus publish %d: %#v", i, pe)
			}
		})
	}
	wg.Wait()
	if got := src.passes() - before; got < 1 || got >= n {
		t.Fatalf("%d misses at once ran %d catalog passes; want them shared", n, got)
	}
}

// TestLookupCoalescesAndPaces drives catalogLookup on synctest's clock:
// misses during a pass share the next one, passes start at most once per
// minGap, and a pass that never finishes gives up after the wait.
func TestLookupCoalescesAndPaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var passes atomic.Int32
		release := make(chan struct{})
		l := newCatalogLookup(func(ctx context.Context) error {
			passes.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
		// The first miss starts a pass; ten more arrive while it runs and
		// need a pass that starts after them: one more, shared.
		var wg sync.WaitGroup
		var ok atomic.Int32
		miss := func() {
			wg.Go(func() {
				if l.refresh(context.Background()) {
					ok.Add(1)
				}
			})
		}
		miss()
		synctest.Wait()
		for range 10 {
			miss()
		}
		synctest.Wait()
		if passes.Load() != 1 {
			t.Fatalf("%d passes while the first runs", passes.Load())
		}
		release <- struct{}{} // the first pass ends; the second waits for the gap
		synctest.Wait()
		if passes.Load() != 1 {
			t.Fatalf("a pass started before minGap: %d", passes.Load())
		}
		time.Sleep(lookupMinGap)
		synctest.Wait()
		if passes.Load() != 2 {
			t.Fatalf("%d passes after the gap, want 2", passes.Load())
		}
		release <- struct{}{}
		wg.Wait()
		if ok.Load() != 11 {
			t.Fatalf("%d of 11 misses saw a pass", ok.Load())
		}
		// A pass that hangs is given up after lookupWait.
		time.Sleep(lookupMinGap)
		if l.refresh(context.Background()) {
			t.Fatal("a hung pass reported as finished")
		}
	})
}

// TestLookupReportsAFailedPass checks a pass that could not read the
// catalog is not reported as a lookup, so the miss is not answered as
// one the catalog lacks.
func TestLookupReportsAFailedPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := true
		l := newCatalogLookup(func(context.Context) error {
			if fail {
				return errors.New("control plane away")
			}
			return nil
		})
		if l.refresh(context.Background()) {
			t.Fatal("a failed pass reported as a lookup")
		}
		fail = false
		if !l.refresh(context.Background()) {
			t.Fatal("a good pass not reported")
		}
	})
}

package catalogsync

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/felixmq/felix/wire"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// seeded returns a source holding one resource of each kind (plus a
// second stream) and a syncer over it that has done its cold pass.
func seeded(t *testing.T) (*fakeSource, *recorder, *Syncer) {
	t.Helper()
	src, rec := newFakeSource(), &recorder{}
	// Recorded children first: the cold pass must still apply parents first.
	src.put(wire.KindStreams, stream("acme", "prod", "orders", 2))
	src.put(wire.KindStreams, stream("acme", "prod", "clicks", 1))
	src.put(wire.KindCaches, cache("acme", "prod", "sessions"))
	src.put(wire.KindNamespaces, namespace("acme", "prod"))
	src.put(wire.KindTenants, tenant("acme"))
	s := NewSyncer(src, rec, 0, quiet)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	return src, rec, s
}

func expectCalls(t *testing.T, rec *recorder, want ...string) {
	t.Helper()
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("applier calls:\n got %q\nwant %q", got, want)
	}
}

func TestColdSyncAppliesSnapshotsInKindOrder(t *testing.T) {
	src, rec := newFakeSource(), &recorder{}
	src.put(wire.KindStreams, stream("acme", "prod", "orders", 2))
	src.put(wire.KindCaches, cache("acme", "prod", "sessions"))
	src.put(wire.KindNamespaces, namespace("acme", "prod"))
	src.put(wire.KindTenants, tenant("acme"))
	s := NewSyncer(src, rec, 0, quiet)
	var jwks []byte
	s.OnJWKS = func(b []byte) { jwks = b }
	if s.Synced() {
		t.Fatal("Synced before any pass")
	}
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "+tenant acme ", "+ns acme/prod", "+cache acme/prod/sessions", "+stream acme/prod/orders shards=2")
	if !s.Synced() || string(jwks) != `{"keys":[]}` {
		t.Fatalf("Synced %v, jwks %q", s.Synced(), jwks)
	}
	want := []string{"snapshot:tenants", "snapshot:namespaces", "snapshot:caches", "snapshot:streams", "jwks"}
	if got := src.callLog(); !slices.Equal(got, want) {
		t.Fatalf("source calls %q, want %q", got, want)
	}
}

func TestIncrementalChangesApplyInOrder(t *testing.T) {
	src, rec, s := seeded(t)
	rec.take()
	src.pageSize = 2 // force several pages in one pass
	src.put(wire.KindTenants, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: "acme", DisplayName: "Acme"}})
	src.put(wire.KindStreams, stream("acme", "prod", "orders", 4))
	src.del(wire.KindStreams, wire.CatalogItem{Stream: &wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "clicks"}})
	src.put(wire.KindStreams, stream("acme", "prod", "audit", 1))
	src.put(wire.KindStreams, stream("acme", "prod", "audit", 3))
	src.del(wire.KindCaches, cache("acme", "prod", "sessions"))
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec,
		"+tenant acme Acme",
		"-cache acme/prod/sessions",
		"+stream acme/prod/orders shards=4",
		// The delete carries only names; the applier gets the spec it knew.
		"-stream acme/prod/clicks shards=1",
		"+stream acme/prod/audit shards=1",
		"+stream acme/prod/audit shards=3",
	)
	// Nothing new: the next pass applies nothing.
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec)
}

func TestFailedFetchKeepsCursorAndOtherKindsSync(t *testing.T) {
	src, rec, s := seeded(t)
	rec.take()
	boom := errors.New("control plane away")
	src.setFail("changes:streams", boom)
	src.put(wire.KindStreams, stream("acme", "prod", "late", 1))
	src.put(wire.KindNamespaces, namespace("acme", "dev"))
	err := s.SyncOnce(context.Background())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "streams") {
		t.Fatalf("SyncOnce = %v, want the streams failure", err)
	}
	expectCalls(t, rec, "+ns acme/dev")

	src.setFail("changes:streams", nil)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "+stream acme/prod/late shards=1")
}

func TestColdSnapshotFailureRetriedNextPass(t *testing.T) {
	src, rec := newFakeSource(), &recorder{}
	src.put(wire.KindTenants, tenant("acme"))
	src.put(wire.KindStreams, stream("acme", "prod", "orders", 1))
	src.setFail("snapshot:tenants", errors.New("nope"))
	s := NewSyncer(src, rec, 0, quiet)
	if err := s.SyncOnce(context.Background()); err == nil {
		t.Fatal("no error")
	}
	if s.Synced() {
		t.Fatal("Synced after a failed pass")
	}
	expectCalls(t, rec, "+stream acme/prod/orders shards=1")
	src.setFail("snapshot:tenants", nil)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "+tenant acme ")
	if !s.Synced() {
		t.Fatal("not Synced after a clean pass")
	}
}

// TestResetResnapshotsAndForgetsVanished: a stream that a snapshot no
// longer holds is forgotten (its data kept), not deleted: nothing said it
// was deleted.
func TestResetResnapshotsAndForgetsVanished(t *testing.T) {
	src, rec, s := seeded(t)
	rec.take()
	src.del(wire.KindStreams, stream("acme", "prod", "clicks", 0))
	src.put(wire.KindStreams, stream("acme", "prod", "fresh", 1))
	src.trim(wire.KindStreams)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec,
		"+stream acme/prod/fresh shards=1",
		"+stream acme/prod/orders shards=2",
		"~stream acme/prod/clicks",
	)
	// Back on the changes feed from the snapshot's cursor.
	src.put(wire.KindStreams, stream("acme", "prod", "after", 1))
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "+stream acme/prod/after shards=1")
}

// pageSource wraps a fakeSource and answers streams changes with a fixed page.
type pageSource struct {
	*fakeSource
	page *wire.CatalogPage
}

func (p *pageSource) Changes(ctx context.Context, kind wire.CatalogKind, since uint64) (*wire.CatalogPage, error) {
	if kind == wire.KindStreams && p.page != nil {
		return p.page, nil
	}
	return p.fakeSource.Changes(ctx, kind, since)
}

func TestMalformedPageRefusedWhole(t *testing.T) {
	src, rec, _ := seeded(t)
	ps := &pageSource{fakeSource: src}
	s := NewSyncer(ps, rec, 0, quiet)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.take()
	ps.page = &wire.CatalogPage{Kind: wire.KindStreams, Seq: 99, Items: []wire.CatalogItem{
		{Seq: 98, Op: wire.OpPut, Stream: &wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "ok"}},
		{Seq: 99, Op: wire.OpPut, Tenant: &wire.Tenant{TenantID: "wrong kind"}},
	}}
	if err := s.SyncOnce(context.Background()); err == nil {
		t.Fatal("malformed page accepted")
	}
	expectCalls(t, rec)
	if got := s.kinds[wire.KindStreams].cursor; got != 5 {
		t.Fatalf("cursor moved to %d", got)
	}
	// A page that does not move the cursor is refused too.
	ps.page = &wire.CatalogPage{Kind: wire.KindStreams, Seq: 1, Items: []wire.CatalogItem{
		{Seq: 1, Op: wire.OpPut, Stream: &wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "old"}},
	}}
	if err := s.SyncOnce(context.Background()); err == nil {
		t.Fatal("page behind the cursor accepted")
	}
	expectCalls(t, rec)
}

func TestApplierErrorReportedButCursorMoves(t *testing.T) {
	src, rec, s := seeded(t)
	rec.take()
	rec.failStream = "bad"
	src.put(wire.KindStreams, stream("acme", "prod", "bad", 0))
	src.put(wire.KindStreams, stream("acme", "prod", "good", 1))
	err := s.SyncOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "acme/prod/bad") {
		t.Fatalf("SyncOnce = %v, want the applier's refusal", err)
	}
	expectCalls(t, rec, "+stream acme/prod/bad shards=0", "+stream acme/prod/good shards=1")
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec)
}

func TestJWKSFailureJoinedAndNotSynced(t *testing.T) {
	src, rec := newFakeSource(), &recorder{}
	src.setFail("jwks", errors.New("no keys"))
	s := NewSyncer(src, rec, 0, quiet)
	called := false
	s.OnJWKS = func([]byte) { called = true }
	if err := s.SyncOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "jwks") {
		t.Fatalf("SyncOnce = %v", err)
	}
	if called || s.Synced() {
		t.Fatalf("OnJWKS called %v, Synced %v", called, s.Synced())
	}
}

package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// spreadStore sends each call to the next member of a group in turn, so
// the suite exercises forwarding and read barriers on followers.
type spreadStore struct {
	*RaftStore // member 1: Close and anything not spread
	members    []*RaftStore
	next       atomic.Uint64
}

func (s *spreadStore) pick() *RaftStore {
	return s.members[s.next.Add(1)%uint64(len(s.members))]
}

func (s *spreadStore) CreateTenant(ctx context.Context, t wire.Tenant) error {
	return s.pick().CreateTenant(ctx, t)
}
func (s *spreadStore) PutTenant(ctx context.Context, t wire.Tenant) error {
	return s.pick().PutTenant(ctx, t)
}
func (s *spreadStore) DeleteTenant(ctx context.Context, id string, r bool) error {
	return s.pick().DeleteTenant(ctx, id, r)
}
func (s *spreadStore) Tenant(ctx context.Context, id string) (wire.Tenant, bool, error) {
	return s.pick().Tenant(ctx, id)
}
func (s *spreadStore) Tenants(ctx context.Context) ([]wire.Tenant, error) {
	return s.pick().Tenants(ctx)
}
func (s *spreadStore) CreateNamespace(ctx context.Context, n wire.Namespace) error {
	return s.pick().CreateNamespace(ctx, n)
}
func (s *spreadStore) CreateStream(ctx context.Context, sp wire.StreamSpec) error {
	return s.pick().CreateStream(ctx, sp)
}
func (s *spreadStore) Stream(ctx context.Context, t, ns, st string) (wire.StreamSpec, bool, error) {
	return s.pick().Stream(ctx, t, ns, st)
}
func (s *spreadStore) Streams(ctx context.Context, t, ns string) ([]wire.StreamSpec, error) {
	return s.pick().Streams(ctx, t, ns)
}
func (s *spreadStore) CreateCache(ctx context.Context, c wire.CacheSpec) error {
	return s.pick().CreateCache(ctx, c)
}
func (s *spreadStore) Snapshot(ctx context.Context, k wire.CatalogKind) (*wire.CatalogPage, error) {
	return s.pick().Snapshot(ctx, k)
}
func (s *spreadStore) Changes(ctx context.Context, k wire.CatalogKind, since uint64, limit int) (*wire.CatalogPage, error) {
	return s.pick().Changes(ctx, k, since, limit)
}
func (s *spreadStore) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	return s.pick().Meta(ctx, key)
}
func (s *spreadStore) PutMeta(ctx context.Context, key string, v []byte) error {
	return s.pick().PutMeta(ctx, key, v)
}
func (s *spreadStore) Bootstrap(ctx context.Context, flag string, t wire.Tenant, ns wire.Namespace) (bool, error) {
	return s.pick().Bootstrap(ctx, flag, t, ns)
}

// Close leaves the group to the test's cleanup.
func (s *spreadStore) Close() error { return nil }

func TestRaftStoreSuiteThreeMembers(t *testing.T) {
	testStore(t, func(t *testing.T) Store {
		g := openTestGroup(t, 3)
		return &spreadStore{RaftStore: g.stores[1], members: []*RaftStore{g.stores[1], g.stores[2], g.stores[3]}}
	})
}

func TestRaftStoreStateSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTestRaft(t, dir)
	seedNamespace(t, s, "acme", "prod")
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "orders", Shards: 3}))
	must(t, s.PutMeta(bg, "k", []byte("v")))
	must(t, s.Close())

	s = openTestRaft(t, dir)
	defer s.Close()
	sp, ok, err := s.Stream(bg, "acme", "prod", "orders")
	must(t, err)
	if !ok || sp.Shards != 3 {
		t.Fatalf("after reopen: %+v, %v", sp, ok)
	}
	if v, ok, _ := s.Meta(bg, "k"); !ok || string(v) != "v" {
		t.Fatalf("meta after reopen: %q", v)
	}
	// The counter continues where it was.
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "more", Shards: 1}))
	p, err := s.Changes(bg, wire.KindStreams, 1, 0)
	must(t, err)
	if len(p.Items) != 1 || p.Items[0].Seq != 2 {
		t.Fatalf("changes after reopen = %+v", p)
	}
}

func TestRaftStoreChangeLogTrimResets(t *testing.T) {
	s := openTestRaft(t, t.TempDir(), withKeep(3))
	defer s.Close()
	for _, id := range []string{"a", "b", "c", "d", "e"} { // seqs 1..5; 3,4,5 kept
		must(t, s.CreateTenant(bg, wire.Tenant{TenantID: id}))
	}
	p, err := s.Changes(bg, wire.KindTenants, 1, 0)
	must(t, err)
	if !p.Reset || len(p.Items) != 0 || p.Seq != 5 {
		t.Fatalf("changes since a trimmed cursor = %+v, want reset", p)
	}
	p, err = s.Changes(bg, wire.KindTenants, 2, 0) // next wanted is 3: still kept
	must(t, err)
	if p.Reset || len(p.Items) != 3 || p.Items[0].Seq != 3 || p.Seq != 5 {
		t.Fatalf("changes since 2 = %+v", p)
	}
	snap, err := s.Snapshot(bg, wire.KindTenants)
	must(t, err)
	if len(snap.Items) != 5 || snap.Seq != 5 {
		t.Fatalf("snapshot = %+v", snap)
	}
}

func TestRaftStoreCorruptEntryIsAnError(t *testing.T) {
	dir := t.TempDir()
	s := openTestRaft(t, dir)
	must(t, s.CreateTenant(bg, wire.Tenant{TenantID: "ok"}))
	must(t, s.Close())
	db, err := bolt.Open(dir+"/catalog.db", 0o600, nil)
	must(t, err)
	must(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(wire.KindTenants)).Put([]byte("bad"), []byte("{not json"))
	}))
	must(t, db.Close())
	s = openTestRaft(t, dir)
	defer s.Close()
	if _, _, err := s.Tenant(bg, "bad"); err == nil {
		t.Fatal("corrupt tenant read without error")
	}
	if _, err := s.Snapshot(bg, wire.KindTenants); err == nil {
		t.Fatal("corrupt snapshot without error")
	}
}

func TestRaftStoreBatchCreate(t *testing.T) {
	g := openTestGroup(t, 3)
	s := g.stores[2]
	seedNamespace(t, s, "acme", "prod")
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "taken", Shards: 1}))
	b := Batch{Tenant: "acme", Namespace: "prod", IdempotencyKey: "k1"}
	for i := range 3 {
		b.Streams = append(b.Streams, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: fmt.Sprintf("s%d", i), Shards: 1})
	}
	b.Caches = []wire.CacheSpec{{TenantID: "acme", Namespace: "prod", Cache: "c"}}

	bad := b
	bad.IdempotencyKey = "k0"
	bad.Streams = append(append([]wire.StreamSpec{}, b.Streams...), wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "taken", Shards: 1})
	_, err := s.BatchCreate(bg, bad)
	wantErr(t, err, ErrConflict)
	if list, _ := g.stores[3].Streams(bg, "acme", "prod"); len(list) != 1 {
		t.Fatalf("a failed batch left %d streams, want only the old one", len(list))
	}

	replayed, err := s.BatchCreate(bg, b)
	must(t, err)
	if replayed {
		t.Fatal("first batch reported replayed")
	}
	replayed, err = g.stores[3].BatchCreate(bg, b)
	must(t, err)
	if !replayed {
		t.Fatal("retried batch not reported replayed")
	}
	other := b
	other.Streams = b.Streams[:1]
	_, err = s.BatchCreate(bg, other)
	wantErr(t, err, ErrConflict)
	if list, _ := g.stores[1].Streams(bg, "acme", "prod"); len(list) != 4 {
		t.Fatalf("after batch: %d streams, want 4", len(list))
	}
	if list, _ := g.stores[1].Caches(bg, "acme", "prod"); len(list) != 1 {
		t.Fatalf("after batch: %d caches, want 1", len(list))
	}
	_, err = s.BatchCreate(bg, Batch{Tenant: "acme", Namespace: "nope", Streams: []wire.StreamSpec{{TenantID: "acme", Namespace: "nope", Stream: "x"}}})
	wantErr(t, err, ErrNotFound)
}

func TestRaftStoreRevocationsAndRBAC(t *testing.T) {
	s := openTestRaft(t, t.TempDir())
	defer s.Close()
	seedNamespace(t, s, "acme", "prod")
	wantErr(t, s.PutRevocation(bg, wire.Revocation{TenantID: "nope", Subject: "u", RevokedBefore: 1}), ErrNotFound)
	must(t, s.PutRevocation(bg, wire.Revocation{TenantID: "acme", Subject: "u1", RevokedBefore: 10, Reason: "left"}))
	must(t, s.PutRevocation(bg, wire.Revocation{TenantID: "acme", Subject: "u1", RevokedBefore: 20}))
	must(t, s.PutRevocation(bg, wire.Revocation{TenantID: "acme", Subject: "u2", RevokedBefore: 30}))
	list, err := s.Revocations(bg, "acme")
	must(t, err)
	if len(list) != 2 || list[0].RevokedBefore != 20 || list[0].Reason != "" {
		t.Fatalf("revocations = %+v", list)
	}
	must(t, s.DeleteRevocation(bg, "acme", "u2"))
	wantErr(t, s.DeleteRevocation(bg, "acme", "u2"), ErrNotFound)
	ch, err := s.Changes(bg, wire.KindRevocations, 0, 0)
	must(t, err)
	if len(ch.Items) != 4 || ch.Items[3].Op != wire.OpDelete || ch.Items[3].Revocation.Subject != "u2" {
		t.Fatalf("revocation feed = %+v", ch)
	}

	must(t, s.PutPolicy(bg, Policy{Tenant: "acme", Role: "reader", Permissions: []string{"stream.subscribe:stream:acme/*"}}))
	must(t, s.PutAssignment(bg, Assignment{Tenant: "acme", Principal: "alice", Role: "reader"}))
	wantErr(t, s.PutPolicy(bg, Policy{Tenant: "nope", Role: "r"}), ErrNotFound)
	pols, err := s.Policies(bg, "acme")
	must(t, err)
	as, err := s.Assignments(bg, "acme")
	must(t, err)
	if len(pols) != 1 || pols[0].Permissions[0] != "stream.subscribe:stream:acme/*" || len(as) != 1 || as[0].Principal != "alice" {
		t.Fatalf("policies %+v, assignments %+v", pols, as)
	}
	must(t, s.DeleteAssignment(bg, "acme", "alice", "reader"))
	wantErr(t, s.DeletePolicy(bg, "acme", "writer"), ErrNotFound)

	// A recursive tenant delete takes its revocations and records along.
	must(t, s.DeleteTenant(bg, "acme", true))
	if list, _ := s.Revocations(bg, "acme"); len(list) != 0 {
		t.Fatalf("revocations after tenant delete: %+v", list)
	}
	if pols, _ := s.Policies(bg, "acme"); len(pols) != 0 {
		t.Fatalf("policies after tenant delete: %+v", pols)
	}
}

func TestRaftStoreErrorsAreTheCatalogSentinels(t *testing.T) {
	if !errors.Is(ErrNotFound, catalog.ErrNotFound) || !errors.Is(ErrConflict, catalog.ErrConflict) {
		t.Fatal("store sentinels differ from the state machine's")
	}
}

package catalogsync

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// revRecorder is a recorder that also follows revocations.
type revRecorder struct{ recorder }

func (r *revRecorder) ApplyRevocation(v wire.Revocation) {
	r.add("+revoke %s/%s<%d", v.TenantID, v.Subject, v.RevokedBefore)
}
func (r *revRecorder) RemoveRevocation(t, sub string) { r.add("-revoke %s/%s", t, sub) }

func revocation(t, sub string, before int64) wire.CatalogItem {
	return wire.CatalogItem{Revocation: &wire.Revocation{TenantID: t, Subject: sub, RevokedBefore: before}}
}

func TestRevocationsFeedFollowedAfterOtherKinds(t *testing.T) {
	src, rec := newFakeSource(), &revRecorder{}
	src.put(wire.KindTenants, tenant("acme"))
	src.put(wire.KindRevocations, revocation("acme", "alice", 100))
	s := NewSyncer(src, rec, 0, quiet)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, &rec.recorder, "+tenant acme ", "+revoke acme/alice<100")
	src.put(wire.KindRevocations, revocation("acme", "bob", 200))
	src.del(wire.KindRevocations, revocation("acme", "alice", 0))
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, &rec.recorder, "+revoke acme/bob<200", "-revoke acme/alice")
}

func TestPlainApplierSkipsRevocations(t *testing.T) {
	src, rec := newFakeSource(), &recorder{}
	src.put(wire.KindRevocations, revocation("acme", "alice", 100))
	if err := NewSyncer(src, rec, 0, quiet).SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(src.callLog(), " "), "revocations") {
		t.Fatalf("an Applier without revocations asked for the feed: %q", src.callLog())
	}
}

func TestUnknownRevocationsKindKeepsSyncing(t *testing.T) {
	src, rec := newFakeSource(), &revRecorder{}
	src.put(wire.KindTenants, tenant("acme"))
	src.put(wire.KindRevocations, revocation("acme", "alice", 100))
	src.setFail("snapshot:revocations", wire.NewError(wire.CodeNotFound, "unknown kind"))
	s := NewSyncer(src, rec, 0, quiet)
	for range 3 {
		if err := s.SyncOnce(context.Background()); err != nil {
			t.Fatalf("pass failed because of the revocations feed: %v", err)
		}
	}
	if !s.Synced() {
		t.Fatal("not synced")
	}
	if n := countCalls(src, "snapshot:revocations"); n != 1 {
		t.Fatalf("asked for the unknown feed %d times within the retry period", n)
	}
	expectCalls(t, &rec.recorder, "+tenant acme ")

	s.UnknownKindRetry = time.Nanosecond
	src.setFail("snapshot:revocations", nil)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, &rec.recorder, "+revoke acme/alice<100")
}

func TestRevocationsOtherFailureNotReturned(t *testing.T) {
	src, rec := newFakeSource(), &revRecorder{}
	src.setFail("snapshot:revocations", wire.NewError(wire.CodeInternal, "boom"))
	s := NewSyncer(src, rec, 0, quiet)
	if err := s.SyncOnce(context.Background()); err != nil || !s.Synced() {
		t.Fatalf("err %v synced %v", err, s.Synced())
	}
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := countCalls(src, "snapshot:revocations"); n != 2 {
		t.Fatalf("a failing feed (not unknown) retried %d times in 2 passes, want 2", n)
	}
}

func TestHTTPUnknownKindIs404(t *testing.T) {
	src := newFakeSource()
	inner := catalogServer(t, src)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/revocations/") {
			http.NotFound(w, r)
			return
		}
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	hs := NewHTTPSource(srv.URL, func() string { return "secret" }, srv.Client())
	_, err := hs.Snapshot(context.Background(), wire.KindRevocations)
	if !IsUnknownKind(err) {
		t.Fatalf("404 not seen as an unknown kind: %v", err)
	}
	s := NewSyncer(hs, &revRecorder{}, 0, quiet)
	if err := s.SyncOnce(context.Background()); err != nil || !s.Synced() {
		t.Fatalf("err %v synced %v", err, s.Synced())
	}
}

func TestHTTPSourceFailsOver(t *testing.T) {
	src := newFakeSource()
	src.put(wire.KindTenants, tenant("acme"))
	good := catalogServer(t, src)
	var sick atomic.Int32
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sick.Add(1)
		http.Error(w, "member is down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(broken.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close() // connection refused from now on

	list := goneURL + ", " + broken.URL + "," + good.URL + "/"
	hs := NewHTTPSource(list, func() string { return "secret" }, good.Client())
	rec := &recorder{}
	s := NewSyncer(hs, rec, 0, quiet)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "+tenant acme ")
	before := sick.Load()
	if before == 0 {
		t.Fatal("the 5xx member was never tried")
	}
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sick.Load() != before {
		t.Fatal("requests went back to the failed member after failing over")
	}

	// A 4xx is an answer, not a member failure: no failover.
	only4xx := NewHTTPSourceMulti([]string{good.URL, broken.URL}, nil, good.Client())
	if _, err := only4xx.JWKS(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("unauthenticated: %v", err)
	}
	if sick.Load() != before {
		t.Fatal("a 401 failed over to the next member")
	}
}

func TestSplitURLs(t *testing.T) {
	got := SplitURLs(" http://a:1 ,,http://b:2,")
	if len(got) != 2 || got[0] != "http://a:1" || got[1] != "http://b:2" {
		t.Fatalf("SplitURLs = %q", got)
	}
}

package catalogsync

import (
	"context"
	"strings"
	"testing"

	"github.com/felixmq/felix/wire"
)

// TestSyncKindsReadsOnlyTheNamedKinds checks an on-demand pass applies
// the new items of the kinds it names, in dependency order, and asks the
// source for nothing else (no JWKS, no other kind).
func TestSyncKindsReadsOnlyTheNamedKinds(t *testing.T) {
	src, rec, s := seeded(t)
	rec.take()
	before := len(src.callLog())
	src.put(wire.KindStreams, stream("acme", "dev", "fresh", 1))
	src.put(wire.KindNamespaces, namespace("acme", "dev"))
	src.put(wire.KindCaches, cache("acme", "prod", "later"))
	if err := s.SyncKinds(context.Background(), wire.KindStreams, wire.KindNamespaces); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "+ns acme/dev", "+stream acme/dev/fresh shards=1")
	calls := src.callLog()[before:]
	for _, c := range calls {
		if c == "jwks" || strings.Contains(c, "caches") || strings.Contains(c, "tenants") {
			t.Fatalf("on-demand pass asked for %q (all calls %q)", c, calls)
		}
	}
	// The cache is left to the next full pass.
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "+cache acme/prod/later")
}

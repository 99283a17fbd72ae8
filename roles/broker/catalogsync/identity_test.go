package catalogsync

import (
	"context"
	"testing"

	"github.com/felixmq/felix/wire"
)

func incarnated(it wire.CatalogItem, inc string) wire.CatalogItem {
	s := *it.Stream
	s.Incarnation = inc
	it.Stream = &s
	return it
}

// TestOnlyAnExplicitDeleteRemovesAStream: a delete on the changes feed
// reaches the Applier as RemoveStream naming the incarnation deleted,
// after the cluster was named.
func TestOnlyAnExplicitDeleteRemovesAStream(t *testing.T) {
	src, rec := newFakeSource(), &recorder{}
	src.cluster = "cluster-a"
	src.put(wire.KindTenants, tenant("acme"))
	src.put(wire.KindNamespaces, namespace("acme", "prod"))
	src.put(wire.KindStreams, incarnated(stream("acme", "prod", "orders", 1), "7"))
	s := NewSyncer(src, rec, 0, quiet)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "cluster cluster-a", "+tenant acme ", "+ns acme/prod", "+stream acme/prod/orders shards=1")
	src.del(wire.KindStreams, incarnated(stream("acme", "prod", "orders", 1), "7"))
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "-stream acme/prod/orders shards=1 incarnation=7")
}

// TestAnotherClusterIsFollowedWithoutDeleting: the source starts
// answering for another cluster (a control plane that came back empty, or
// a wrong URL). The broker follows the new catalog, but what only the old
// one held is forgotten, never deleted.
func TestAnotherClusterIsFollowedWithoutDeleting(t *testing.T) {
	src, rec := newFakeSource(), &recorder{}
	src.cluster = "cluster-a"
	src.put(wire.KindTenants, tenant("acme"))
	src.put(wire.KindNamespaces, namespace("acme", "prod"))
	src.put(wire.KindCaches, cache("acme", "prod", "sessions"))
	src.put(wire.KindStreams, incarnated(stream("acme", "prod", "orders", 1), "7"))
	src.put(wire.KindStreams, incarnated(stream("acme", "prod", "clicks", 1), "8"))
	s := NewSyncer(src, rec, 0, quiet)
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.take()

	fresh := newFakeSource()
	fresh.cluster = "cluster-b"
	fresh.put(wire.KindTenants, tenant("default"))
	fresh.put(wire.KindNamespaces, namespace("default", "default"))
	src.become(fresh)
	for range 2 {
		if err := s.SyncOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	expectCalls(t, rec,
		"cluster cluster-b",
		"+tenant default ",
		"-tenant acme",
		"+ns default/default",
		"-ns acme/prod",
		"~cache acme/prod/sessions",
		"~stream acme/prod/clicks",
		"~stream acme/prod/orders",
	)
}

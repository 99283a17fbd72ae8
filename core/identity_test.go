package core

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/felixmq/felix/wire"
)

// identityBroker is a broker with storage under dir following cluster.
func identityBroker(t *testing.T, dir, cluster string) *Broker {
	t.Helper()
	b := NewBroker(Config{Storage: &StorageConfig{Dir: dir}})
	t.Cleanup(b.Close)
	b.SetCluster(cluster)
	return b
}

func durableSpec(incarnation string) wire.StreamSpec {
	return wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "orders", Durable: true, Incarnation: incarnation}
}

var ordersKey = StreamKey{"t", "ns", "orders"}

// applyAndCount applies spec and returns the records its shard 0 holds.
func applyAndCount(t *testing.T, b *Broker, spec wire.StreamSpec) uint64 {
	t.Helper()
	if err := b.ApplyStream(spec); err != nil {
		t.Fatal(err)
	}
	st, ok := b.Stream(ordersKey)
	if !ok {
		t.Fatal("stream not served")
	}
	sh := shard0(t, st)
	if err := sh.Unavailable(); err != nil {
		t.Fatalf("shard unavailable: %v", err)
	}
	return sh.NextOffset()
}

func publishN(t *testing.T, b *Broker, n int, tag string) {
	t.Helper()
	st, _ := b.Stream(ordersKey)
	publish(t, shard0(t, st), payloads(n, tag))
}

func held(t *testing.T, b *Broker) []string {
	t.Helper()
	hs, err := b.HeldStreams()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, h := range hs {
		out = append(out, fmt.Sprintf("%s %s/%s", h.Key.Stream, h.Identity.Cluster, h.Identity.Incarnation))
	}
	return out
}

// TestDurableFilesDeletedOnlyByTheirDelete: a stream that stops being
// served (missing from a snapshot, its tenant gone, a broker restarted
// against an empty catalog) keeps its records and is served again with
// them when it comes back with the same identity; a delete naming another
// incarnation deletes nothing; only a delete naming its own does.
func TestDurableFilesDeletedOnlyByTheirDelete(t *testing.T) {
	dir := t.TempDir()
	b := identityBroker(t, dir, "cluster-a")
	if n := applyAndCount(t, b, durableSpec("7")); n != 0 {
		t.Fatalf("new stream holds %d records", n)
	}
	publishN(t, b, 5, "r")

	b.RemoveStream(ordersKey)
	if _, ok := b.Stream(ordersKey); ok {
		t.Fatal("removed stream still served")
	}
	if got := held(t, b); len(got) != 1 || got[0] != "orders cluster-a/7" {
		t.Fatalf("held after removal: %q", got)
	}
	if n := applyAndCount(t, b, durableSpec("7")); n != 5 {
		t.Fatalf("back with the same identity, the stream holds %d records, want 5", n)
	}
	if got := held(t, b); len(got) != 0 {
		t.Fatalf("held while served: %q", got)
	}

	b.RemoveTenant("t")
	b.Close()
	b = identityBroker(t, dir, "cluster-a") // a restart: nothing applied yet
	if got := held(t, b); len(got) != 1 {
		t.Fatalf("held after a restart with an empty catalog: %q", got)
	}
	b.DeleteStream(ordersKey, "8")
	if n := applyAndCount(t, b, durableSpec("7")); n != 5 {
		t.Fatalf("after a delete of another incarnation: %d records, want 5", n)
	}
	b.DeleteStream(ordersKey, "7")
	if _, ok := b.Stream(ordersKey); ok {
		t.Fatal("deleted stream still served")
	}
	if _, err := os.Stat(streamDir(dir, ordersKey)); !os.IsNotExist(err) {
		t.Fatalf("deleted stream's files: %v", err)
	}
	if got := held(t, b); len(got) != 0 {
		t.Fatalf("held after the delete: %q", got)
	}
}

// TestDurableFilesOfAnotherIdentitySetAside: a stream re-created under the
// same name (a delete this broker missed), or the same name in another
// cluster, starts empty; the old files are set aside, not deleted, and
// come back when their identity does.
func TestDurableFilesOfAnotherIdentitySetAside(t *testing.T) {
	dir := t.TempDir()
	b := identityBroker(t, dir, "cluster-a")
	applyAndCount(t, b, durableSpec("7"))
	publishN(t, b, 3, "seven")

	if n := applyAndCount(t, b, durableSpec("9")); n != 0 {
		t.Fatalf("re-created stream holds %d records", n)
	}
	publishN(t, b, 2, "nine")
	if got := held(t, b); len(got) != 1 || got[0] != "orders cluster-a/7" {
		t.Fatalf("held: %q", got)
	}

	b.SetCluster("cluster-b") // another control plane, same names
	if n := applyAndCount(t, b, durableSpec("7")); n != 0 {
		t.Fatalf("another cluster's stream holds %d records", n)
	}
	if got := held(t, b); len(got) != 2 {
		t.Fatalf("held: %q", got)
	}

	b.SetCluster("cluster-a")
	if n := applyAndCount(t, b, durableSpec("7")); n != 3 {
		t.Fatalf("back in cluster a, incarnation 7 holds %d records, want 3", n)
	}
	b.DeleteStream(ordersKey, "9")
	if got := held(t, b); len(got) != 1 || got[0] != "orders cluster-b/7" {
		t.Fatalf("held after deleting incarnation 9: %q", got)
	}
	if n := applyAndCount(t, b, durableSpec("7")); n != 3 {
		t.Fatalf("incarnation 7 after deleting 9: %d records", n)
	}
}

// TestDurableFilesFromBeforeIdentitiesAreAdopted: a stream directory
// written before identities (no IDENTITY file) serves the stream the
// catalog created before incarnations, and is bound to the cluster; a
// stream created since, under its name, does not take it.
func TestDurableFilesFromBeforeIdentitiesAreAdopted(t *testing.T) {
	dir := t.TempDir()
	b := identityBroker(t, dir, "")
	applyAndCount(t, b, durableSpec(""))
	publishN(t, b, 4, "old")
	b.Close()
	if err := os.Remove(filepath.Join(streamDir(dir, ordersKey), identityFile)); err != nil {
		t.Fatal(err)
	}

	b = identityBroker(t, dir, "cluster-a")
	if n := applyAndCount(t, b, durableSpec("")); n != 4 {
		t.Fatalf("adopted stream holds %d records, want 4", n)
	}
	id, _, err := readIdentity(streamDir(dir, ordersKey))
	if err != nil || id != (StreamIdentity{Cluster: "cluster-a"}) {
		t.Fatalf("identity after adoption: %+v, %v", id, err)
	}
	if n := applyAndCount(t, b, durableSpec("12")); n != 0 {
		t.Fatalf("a newer incarnation took the old files: %d records", n)
	}
}

// TestDurableCrashBeforeFirstLogLeavesNothingToKeep: a directory that
// holds only an identity (a crash between its creation and its first log)
// is not worth setting aside.
func TestDurableCrashBeforeFirstLogLeavesNothingToKeep(t *testing.T) {
	dir := t.TempDir()
	sd := streamDir(dir, ordersKey)
	if err := os.MkdirAll(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeIdentity(sd, StreamIdentity{Cluster: "cluster-a", Incarnation: "3"}); err != nil {
		t.Fatal(err)
	}
	b := identityBroker(t, dir, "cluster-a")
	applyAndCount(t, b, durableSpec("4"))
	if got := held(t, b); len(got) != 0 {
		t.Fatalf("held: %q", got)
	}
}

package core

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// damageFixture is a broker holding a replica of shard 0 with n records
// of generation 1, having promised promised of them, then stopped.
func damageFixture(t *testing.T, n, promised uint64) (dir string, k StreamKey) {
	t.Helper()
	dir = t.TempDir()
	b, k := newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Append(context.Background(), 1, damageRecs(0, n)); err != nil {
		t.Fatal(err)
	}
	if err := b.RecordPromises([]Promise{{Key: k, Shard: 0, Generation: 1, Durable: promised}}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	return dir, k
}

func damageRecs(from, to uint64) []flog.Record {
	var out []flog.Record
	for off := from; off < to; off++ {
		out = append(out, flog.Record{Offset: off, Generation: 1, TimeMicros: 1, Payload: []byte("a record of some length")})
	}
	return out
}

func damageSegment(t *testing.T, dir string, k StreamKey) string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(ShardDir(dir, k, 0), "*.log"))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	sort.Strings(segs)
	return segs[len(segs)-1]
}

func truncateHalf(t *testing.T, seg string) {
	t.Helper()
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// A copy truncated while its broker was down, short of what it promised,
// opens damaged, stays damaged across a restart, and is whole again once
// its leader refilled what it promised.
func TestACopyShortOfWhatItPromisedIsDamagedUntilRefilled(t *testing.T) {
	dir, k := damageFixture(t, 20, 20)
	truncateHalf(t, damageSegment(t, dir, k))
	b, _ := newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Damaged() || r.NextOffset() >= 20 {
		t.Fatalf("copy ending at %d of 20 promised: damaged %v", r.NextOffset(), r.Damaged())
	}
	if v := metricValue(t, b, "felix_shard_replicas_damaged"); v != 1 {
		t.Fatalf("felix_shard_replicas_damaged %v with one damaged copy open", v)
	}
	if !b.CloseStreamReplica(k, 0) {
		t.Fatal("no replica to close")
	}
	if v := metricValue(t, b, "felix_shard_replicas_damaged"); v != 0 {
		t.Fatalf("felix_shard_replicas_damaged %v with the damaged copy closed", v)
	}
	b.Close()
	b, _ = newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	if r, err = b.OpenStreamReplica(k, 0); err != nil || !r.Damaged() {
		t.Fatalf("reopened before a refill: damaged %v, %v", r != nil && r.Damaged(), err)
	}
	if v := metricValue(t, b, "felix_shard_replicas_damaged"); v != 1 {
		t.Fatalf("felix_shard_replicas_damaged %v with the damaged copy reopened", v)
	}
	next := r.NextOffset()
	if _, _, err := r.Ship(context.Background(), Shipment{Generation: 1, From: next, NoPrevCheck: true, Records: damageRecs(next, 19)}); err != nil {
		t.Fatal(err)
	}
	if !r.Damaged() {
		t.Fatal("whole again at 19 of 20 promised")
	}
	if _, _, err := r.Ship(context.Background(), Shipment{Generation: 1, From: 19, NoPrevCheck: true, Records: damageRecs(19, 20)}); err != nil {
		t.Fatal(err)
	}
	if r.Damaged() {
		t.Fatal("still damaged holding all 20 it promised")
	}
	if v := metricValue(t, b, "felix_shard_replicas_damaged"); v != 0 {
		t.Fatalf("felix_shard_replicas_damaged %v once the copy was refilled", v)
	}
	if _, err := os.Stat(filepath.Join(ShardDir(dir, k, 0), damagedMarker)); !os.IsNotExist(err) {
		t.Fatalf("damage marker left: %v", err)
	}
}

// A torn tail past what the copy promised is not damage: those records
// were never answered.
func TestATornTailPastThePromiseIsNoDamage(t *testing.T) {
	dir, k := damageFixture(t, 20, 3)
	truncateHalf(t, damageSegment(t, dir, k))
	b, _ := newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Damaged() || r.NextOffset() < 3 {
		t.Fatalf("copy ending at %d, 3 promised: damaged %v", r.NextOffset(), r.Damaged())
	}
}

// A copy whose log refuses to recover is set aside, an empty copy with
// its fence takes its place, damaged until it holds what it promised.
func TestACorruptCopyIsSetAsideAndRefilled(t *testing.T) {
	dir, k := damageFixture(t, 20, 20)
	b0, _ := newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	r0, err := b0.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r0.Fence(4); err != nil {
		t.Fatal(err)
	}
	b0.Close()
	seg := damageSegment(t, dir, k)
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(seg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Damaged() || r.NextOffset() != 0 || r.Fenced() != 4 {
		t.Fatalf("after corruption: damaged %v next %d fence %d; want an empty damaged copy fenced at 4", r.Damaged(), r.NextOffset(), r.Fenced())
	}
	aside, _ := filepath.Glob(filepath.Join(dir, damagedAsideRoot, "t", "ns", "s", "0-*", "*.log"))
	if len(aside) != 1 {
		t.Fatalf("set aside: %v", aside)
	}
	if _, _, err := r.Ship(context.Background(), Shipment{Generation: 4, NoPrevCheck: true, Records: damageRecs(0, 5), Tail: 5}); err != nil {
		t.Fatal(err)
	}
	if r.Damaged() {
		t.Fatal("still damaged holding its leader's whole log")
	}
}

// A copy its leader cut back (a suffix no majority held) is no damage at
// its next open.
func TestACopyCutBackByItsLeaderIsNoDamage(t *testing.T) {
	dir, k := damageFixture(t, 20, 20)
	b, _ := newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b, _ = newPlacedBroker(t, dir, wire.StreamSpec{Durable: true})
	if r, err = b.OpenStreamReplica(k, 0); err != nil || r.Damaged() || r.NextOffset() != 10 {
		t.Fatalf("cut back to 10: %v damaged %v next %d", err, r != nil && r.Damaged(), r.NextOffset())
	}
}

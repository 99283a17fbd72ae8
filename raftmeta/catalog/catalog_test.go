package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/felixmq/felix/raftmeta/fsm"
	"github.com/felixmq/felix/wire"
)

func openTestCatalog(t *testing.T, opts ...CatalogOption) *Catalog {
	t.Helper()
	c, err := OpenCatalog(filepath.Join(t.TempDir(), "catalog.db"), append(opts, CatalogNoSync())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// catalogScript is a command sequence touching every operation, including
// ones that fail deterministically.
func catalogScript() [][]byte {
	ten := func(id string) wire.CatalogItem { return wire.CatalogItem{Tenant: &wire.Tenant{TenantID: id}} }
	ns := func(t, n string) wire.CatalogItem {
		return wire.CatalogItem{Namespace: &wire.Namespace{TenantID: t, Namespace: n}}
	}
	st := func(name string) wire.StreamSpec {
		return wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: name, Shards: 2}
	}
	cmds := [][]byte{
		CmdBootstrap("bootstrapped", []byte("2026-01-01T00:00:00Z"), wire.Tenant{TenantID: "default"}, wire.Namespace{TenantID: "default", Namespace: "default"}),
		CmdBootstrap("bootstrapped", []byte("2026-01-02T00:00:00Z"), wire.Tenant{TenantID: "default"}, wire.Namespace{TenantID: "default", Namespace: "default"}),
		CmdPutMetaIfAbsent("signing_key", []byte("key-1")),
		CmdPutMetaIfAbsent("signing_key", []byte("key-2")),
		CmdWrite(wire.KindTenants, ModeCreate, ten("acme")),
		CmdWrite(wire.KindTenants, ModeCreate, ten("acme")), // conflict
		CmdWrite(wire.KindNamespaces, ModeCreate, ns("acme", "prod")),
		CmdWrite(wire.KindNamespaces, ModeCreate, ns("ghost", "prod")), // not found
		CmdBatch(Batch{Tenant: "acme", Namespace: "prod", IdempotencyKey: "b1", Streams: []wire.StreamSpec{st("a"), st("b")},
			Caches: []wire.CacheSpec{{TenantID: "acme", Namespace: "prod", Cache: "c"}}}),
		CmdBatch(Batch{Tenant: "acme", Namespace: "prod", Streams: []wire.StreamSpec{st("c"), st("a")}}), // conflict, nothing kept
		CmdWrite(wire.KindRevocations, ModePut, wire.CatalogItem{Revocation: &wire.Revocation{TenantID: "acme", Subject: "bob", RevokedBefore: 100}}),
		CmdPutRecord(RecordPolicies, "acme/reader", []byte(`{"role":"reader"}`)),
		CmdDelete(wire.KindNamespaces, "acme/prod", false), // conflict: has children
		CmdDelete(wire.KindStreams, "acme/prod/b", false),
		CmdPutMeta("x", []byte("y")),
		CmdPutMeta("gone", []byte("soon")),
		CmdDeleteMeta("gone"),
		CmdDeleteMeta(""), // bad command
		[]byte("not json"),
		[]byte(`{"v":99,"op":"write"}`),
		CmdImport(Import{Tenants: []wire.Tenant{{TenantID: "z"}}}), // not empty: skipped
	}
	for i := range 50 {
		cmds = append(cmds, CmdWrite(wire.KindStreams, ModeCreate, wire.CatalogItem{Stream: ptr(st(fmt.Sprintf("s%02d", i)))}))
	}
	return append(cmds, CmdDelete(wire.KindTenants, "acme", true))
}

func ptr[T any](v T) *T { return &v }

func catalogSnapshotBytes(t *testing.T, c *Catalog) []byte {
	t.Helper()
	rc, _, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCatalogDeterministicSnapshots(t *testing.T) {
	a, b := openTestCatalog(t, CatalogChangeLogKeep(20)), openTestCatalog(t, CatalogChangeLogKeep(20))
	for i, cmd := range catalogScript() {
		ra, ea := a.Apply(uint64(i+1), cmd)
		rb, eb := b.Apply(uint64(i+1), cmd)
		if !bytes.Equal(ra, rb) || fmt.Sprint(ea) != fmt.Sprint(eb) {
			t.Fatalf("command %d: results differ: %q/%v vs %q/%v", i, ra, ea, rb, eb)
		}
		if ea != nil && !isDeterministic(ea) {
			t.Fatalf("command %d: local error %v", i, ea)
		}
	}
	sa, sb := catalogSnapshotBytes(t, a), catalogSnapshotBytes(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatal("the same commands gave different snapshots")
	}
	// A third catalog restored from the snapshot is identical too, and
	// re-applying old indexes does nothing.
	c := openTestCatalog(t, CatalogChangeLogKeep(20))
	if err := c.Restore(bytes.NewReader(sa)); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Apply(3, CmdPutMeta("x", []byte("changed"))); res != nil || err != nil {
		t.Fatalf("re-applied an old index: %q %v", res, err)
	}
	if !bytes.Equal(catalogSnapshotBytes(t, c), sa) {
		t.Fatal("restored catalog differs")
	}
	if c.AppliedIndex() != uint64(len(catalogScript())) {
		t.Fatalf("applied index %d", c.AppliedIndex())
	}
}

func TestCatalogOutcomes(t *testing.T) {
	c := openTestCatalog(t)
	idx := uint64(0)
	apply := func(cmd []byte) ([]byte, error) { idx++; return c.Apply(idx, cmd) }
	for i, cmd := range catalogScript()[:10] {
		res, err := apply(cmd)
		switch i {
		case 0:
			if string(res) != "1" || err != nil {
				t.Fatalf("first bootstrap: %q %v", res, err)
			}
		case 1:
			if string(res) != "0" {
				t.Fatalf("second bootstrap: %q", res)
			}
		case 3:
			if string(res) != "key-1" {
				t.Fatalf("second put-if-absent returned %q, want the first value", res)
			}
		case 5, 9:
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("command %d: %v, want conflict", i, err)
			}
		case 7:
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("command %d: %v, want not found", i, err)
			}
		}
	}
	if _, ok, _ := c.Item(wire.KindStreams, "acme/prod/c"); ok {
		t.Fatal("a failed batch left a stream behind")
	}
	if c.AppliedIndex() != idx {
		t.Fatalf("applied %d after %d commands (failed ones must advance it too)", c.AppliedIndex(), idx)
	}
	if res, err := apply(CmdBatch(Batch{Tenant: "acme", Namespace: "prod", IdempotencyKey: "b1",
		Streams: []wire.StreamSpec{{TenantID: "acme", Namespace: "prod", Stream: "a", Shards: 2}, {TenantID: "acme", Namespace: "prod", Stream: "b", Shards: 2}},
		Caches:  []wire.CacheSpec{{TenantID: "acme", Namespace: "prod", Cache: "c"}}})); err != nil || string(res) != "replayed" {
		t.Fatalf("retried batch: %q %v", res, err)
	}
	imp, err := c.Export()
	if err != nil {
		t.Fatal(err)
	}
	fresh := openTestCatalog(t)
	if res, err := fresh.Apply(1, CmdImport(*imp)); err != nil || string(res) != "1" {
		t.Fatalf("import: %q %v", res, err)
	}
	if v, ok, _ := fresh.Meta("signing_key"); !ok || string(v) != "key-1" {
		t.Fatalf("imported meta: %q", v)
	}
	if items, _ := fresh.Items(wire.KindStreams, ""); len(items) != 2 {
		t.Fatalf("imported %d streams, want 2", len(items))
	}
}

func FuzzCatalogApply(f *testing.F) {
	for _, cmd := range append(catalogScript()[:20], brokerScript()...) {
		f.Add(cmd)
	}
	c, err := OpenCatalog(filepath.Join(f.TempDir(), "catalog.db"), CatalogNoSync())
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	idx := uint64(0)
	f.Fuzz(func(t *testing.T, cmd []byte) {
		idx++
		if _, err := c.Apply(idx, cmd); err != nil && !isDeterministic(err) {
			t.Fatalf("local error from a bad command: %v", err)
		}
	})
}

func TestCatalogRequestIDsApplyOnce(t *testing.T) {
	c := openTestCatalog(t)
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	create := must(WithRequestID(CmdWrite(wire.KindTenants, ModeCreate, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: "acme"}}), "req-1"))
	if _, err := c.Apply(1, create); err != nil {
		t.Fatal(err)
	}
	// The same request committed again (a re-proposal) answers like the first.
	if _, err := c.Apply(2, create); err != nil {
		t.Fatalf("re-proposed create: %v, want the first outcome (success)", err)
	}
	dup := must(WithRequestID(CmdWrite(wire.KindTenants, ModeCreate, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: "acme"}}), "req-2"))
	if _, err := c.Apply(3, dup); !errors.Is(err, ErrConflict) {
		t.Fatalf("a new request creating the same tenant: %v, want conflict", err)
	}
	if _, err := c.Apply(4, dup); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "acme") {
		t.Fatalf("re-proposed failed request: %v, want its recorded conflict", err)
	}
	ask := must(WithRequestID(CmdPutMetaIfAbsent("k", []byte("v1")), "req-3"))
	c.Apply(5, ask)
	c.Apply(6, CmdPutMeta("k", []byte("v2")))
	if res, err := c.Apply(7, ask); err != nil || string(res) != "v1" {
		t.Fatalf("re-proposed put-if-absent: %q %v, want the recorded v1", res, err)
	}
	if c.AppliedIndex() != 7 {
		t.Fatalf("applied index %d", c.AppliedIndex())
	}
	for _, junk := range []string{"junk", "null", "[]", `"s"`, "{}"} {
		if _, err := WithRequestID([]byte(junk), "x"); err == nil {
			t.Fatalf("WithRequestID accepted %s", junk)
		}
	}
	// The id is added without changing the command, and a second id
	// replaces the first.
	plain := CmdWrite(wire.KindTenants, ModeCreate, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: "acme", DisplayName: `a "quoted" name`}})
	for _, cmd := range [][]byte{plain, must(WithRequestID(plain, "first"))} {
		var got, want catalogCmd
		if err := json.Unmarshal(must(WithRequestID(cmd, "id-\"x\"")), &got); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(plain, &want)
		want.Request = `id-"x"`
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("with a request id: %+v, want %+v", got, want)
		}
	}
}

// Applying the script in batches of every size gives the same results,
// errors and snapshot as applying it entry by entry.
func TestCatalogApplyBatchMatchesApply(t *testing.T) {
	script := catalogScript()
	one := openTestCatalog(t)
	var want []fsm.BatchResult
	for i, cmd := range script {
		res, err := one.Apply(uint64(i+1), cmd)
		want = append(want, fsm.BatchResult{Result: res, Err: err})
	}
	wantSnap := catalogSnapshotBytes(t, one)
	for _, size := range []int{1, 3, 7, len(script)} {
		c := openTestCatalog(t)
		var got []fsm.BatchResult
		for start := 0; start < len(script); start += size {
			var batch []fsm.BatchEntry
			for i := start; i < min(start+size, len(script)); i++ {
				batch = append(batch, fsm.BatchEntry{Index: uint64(i + 1), Cmd: script[i]})
			}
			res, err := c.ApplyBatch(batch)
			if err != nil {
				t.Fatalf("batch size %d at %d: %v", size, start, err)
			}
			got = append(got, res...)
		}
		for i := range want {
			if !bytes.Equal(got[i].Result, want[i].Result) || fmt.Sprint(got[i].Err) != fmt.Sprint(want[i].Err) {
				t.Fatalf("batch size %d, entry %d: got %q/%v, want %q/%v", size, i+1, got[i].Result, got[i].Err, want[i].Result, want[i].Err)
			}
		}
		if !bytes.Equal(catalogSnapshotBytes(t, c), wantSnap) {
			t.Fatalf("batch size %d: snapshot differs from entry-by-entry apply", size)
		}
		// Entries already applied are skipped, as Apply skips them.
		if res, err := c.ApplyBatch([]fsm.BatchEntry{{Index: 1, Cmd: script[0]}}); err != nil || res[0].Result != nil || res[0].Err != nil {
			t.Fatalf("re-applied entry 1: %+v %v", res, err)
		}
	}
}

// The catalog's AppliedIndex is its last committed write's: a restore
// sets it, a write after Close fails with an error and leaves it alone.
func TestCatalogAppliedIndexAfterRestoreAndClose(t *testing.T) {
	a := openTestCatalog(t)
	for i, cmd := range catalogScript() {
		_, _ = a.Apply(uint64(i+1), cmd) // outcomes are checked in TestCatalogOutcomes
	}
	rc, idx, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := OpenCatalog(filepath.Join(t.TempDir(), "catalog.db"), CatalogNoSync())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if got := b.AppliedIndex(); got != idx || idx != a.AppliedIndex() {
		t.Fatalf("restored applied index %d, snapshot at %d, source at %d", got, idx, a.AppliedIndex())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(idx+1, CmdPutMeta("k", []byte("v"))); err == nil {
		t.Fatal("Apply after Close succeeded")
	}
	if got := b.AppliedIndex(); got != idx {
		t.Fatalf("applied index after Close = %d, want %d", got, idx)
	}
}

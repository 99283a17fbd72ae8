package cachelog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindIncarnations(t *testing.T) {
	storage := t.TempDir()
	if incs, err := FindIncarnations(storage); incs != nil || err != nil {
		t.Fatalf("no caches dir: %v %v", incs, err)
	}
	for _, d := range []string{"b/ns/c2/incarnation-9", "a/ns/c1/no-incarnation", "a/ns/c1/incarnation-x.1", "a/ns/c1/stray", "a/ns/c3"} {
		if err := os.MkdirAll(filepath.Join(storage, CachesDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	incs, err := FindIncarnations(storage)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range incs {
		got = append(got, in.Tenant+"/"+in.Namespace+"/"+in.Cache+"/"+in.ID)
		if at := IncarnationAt(in.Dir); at != in {
			t.Errorf("IncarnationAt(%s) = %+v, want %+v", in.Dir, at, in)
		}
	}
	if want := "a/ns/c1/x.1 a/ns/c1/ b/ns/c2/9"; strings.Join(got, " ") != want {
		t.Fatalf("incarnations %q, want %q", strings.Join(got, " "), want)
	}
	if at := IncarnationAt(filepath.Join(storage, "elsewhere", "incarnation-3")); at.Cache != "" || at.ID != "" {
		t.Fatalf("a directory outside the layout named %+v", at)
	}
}

func TestReadOffsetBase(t *testing.T) {
	dir := t.TempDir()
	if _, found, err := ReadOffsetBase(dir); found || err != nil {
		t.Fatalf("no file: found %v, %v", found, err)
	}
	if err := os.WriteFile(filepath.Join(dir, OffsetBaseFile), OffsetBaseBytes(1<<60+5), 0o644); err != nil {
		t.Fatal(err)
	}
	if base, found, err := ReadOffsetBase(dir); base != 1<<60+5 || !found || err != nil {
		t.Fatalf("base %d found %v: %v", base, found, err)
	}
	if err := os.WriteFile(filepath.Join(dir, OffsetBaseFile), []byte{1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadOffsetBase(dir); err == nil || !strings.Contains(err.Error(), "holds 3 bytes, not 8") {
		t.Fatalf("short file: %v", err)
	}
}

// TestSnapshotUse: the decision the cache store's open and inspect share.
func TestSnapshotUse(t *testing.T) {
	damaged := errors.New("damaged")
	for _, tc := range []struct {
		name                      string
		point, oldest             uint64
		found                     bool
		err                       error
		start, next               uint64
		usable, unusable, refused bool
	}{
		{name: "none, log from 0", next: 10},
		{name: "none, log compacted", start: 4, next: 10, refused: true},
		{name: "good", point: 8, oldest: 5, found: true, start: 4, next: 10, usable: true},
		{name: "point past the log", point: 11, oldest: 5, found: true, next: 10, unusable: true},
		{name: "a version compacted away", point: 8, oldest: 3, found: true, start: 4, next: 10, unusable: true, refused: true},
		{name: "damaged, log from 0", found: true, err: damaged, next: 10, unusable: true},
		{name: "damaged, log compacted", found: true, err: damaged, start: 4, next: 10, unusable: true, refused: true},
	} {
		usable, unusable, refusal := SnapshotUse(tc.point, tc.oldest, tc.found, tc.err, tc.start, tc.next)
		if usable != tc.usable || (unusable != nil) != tc.unusable || (refusal != nil) != tc.refused {
			t.Errorf("%s: usable %v, unusable %v, refusal %v", tc.name, usable, unusable, refusal)
		}
		if tc.err != nil && !errors.Is(unusable, tc.err) {
			t.Errorf("%s: unusable %v does not wrap the read error", tc.name, unusable)
		}
	}
}

// TestInspectAbsentLog: an incarnation whose cache log does not exist
// yet (the broker creates it at open) is an empty log that opens, not an
// unreadable one; without a counters directory there is no counter log.
func TestInspectAbsentLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), CachesDir, "t", "n", "c", NoIncarnationDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in := Inspect(IncarnationAt(dir), InspectOptions{Cache: true, Counters: true, Records: true})
	l := in.CacheLog
	if l == nil || !l.Absent || l.Err != nil || l.Refused() || l.Report.NextOffset != 0 || in.CounterLog != nil {
		t.Fatalf("absent log: %+v / %+v", l, in.CounterLog)
	}
	if sn := in.Snapshot; sn.Present || sn.Usable || sn.Damage != nil {
		t.Fatalf("snapshot %+v", sn)
	}
}

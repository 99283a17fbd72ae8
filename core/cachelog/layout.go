package cachelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The files of a log-backed cache under a broker's durable storage
// directory (docs/storage.md, "Beneath the broker's cache"):
//
//	STORAGE/caches/TENANT/NAMESPACE/CACHE/INCARNATION_DIR/
//	    offset-base      8 bytes, big-endian: the cache's first offset
//	    log/             the cache log (segment files)
//	    index.snap       the cache log's index snapshot (compaction)
//	    counters/log/    the counter log
//
// INCARNATION_DIR is "incarnation-" and the catalog's incarnation, or
// NoIncarnationDir for a cache created without one.
const (
	CachesDir        = "caches"
	LogDir           = "log"
	CounterDir       = "counters"
	OffsetBaseFile   = "offset-base"
	NoIncarnationDir = "no-incarnation"
	incarnationDir   = "incarnation-"
)

// IncarnationDirName is the directory name of an incarnation ("" for
// none). It does not check that the name is a valid directory name.
func IncarnationDirName(incarnation string) string {
	if incarnation == "" {
		return NoIncarnationDir
	}
	return incarnationDir + incarnation
}

// Incarnation is one cache incarnation's directory.
type Incarnation struct {
	Tenant, Namespace, Cache string
	// ID is the catalog's incarnation, "" for NoIncarnationDir.
	ID  string
	Dir string
}

// IncarnationAt names the incarnation in dir from its path when the path
// ends in CACHE/INCARNATION_DIR below TENANT/NAMESPACE, as the layout
// has it; otherwise only Dir is set.
func IncarnationAt(dir string) Incarnation {
	in := Incarnation{Dir: dir}
	clean := filepath.Clean(dir)
	base := filepath.Base(clean)
	inc, ok := strings.CutPrefix(base, incarnationDir)
	if !ok && base != NoIncarnationDir {
		return in
	}
	if !ok {
		inc = ""
	}
	cache := filepath.Dir(clean)
	ns := filepath.Dir(cache)
	tenant := filepath.Dir(ns)
	if filepath.Base(filepath.Dir(tenant)) != CachesDir {
		return in
	}
	in.Tenant, in.Namespace, in.Cache, in.ID = filepath.Base(tenant), filepath.Base(ns), filepath.Base(cache), inc
	return in
}

// FindIncarnations lists the cache incarnation directories under
// storage (STORAGE/caches/TENANT/NAMESPACE/CACHE/INCARNATION_DIR), in
// name order. A storage directory without caches has none. Directories
// at the incarnation level whose names are not incarnation directories
// are left out; an unreadable directory is an error joined to the
// result, which still lists what could be read.
func FindIncarnations(storage string) ([]Incarnation, error) {
	root := filepath.Join(storage, CachesDir)
	paths, err := WalkLevels(root, 4)
	var out []Incarnation
	for _, p := range paths {
		inc, ok := strings.CutPrefix(p[3], incarnationDir)
		if !ok && p[3] != NoIncarnationDir {
			continue
		}
		if !ok {
			inc = ""
		}
		out = append(out, Incarnation{Tenant: p[0], Namespace: p[1], Cache: p[2], ID: inc, Dir: filepath.Join(root, filepath.Join(p...))})
	}
	return out, err
}

// WalkLevels returns the directories exactly levels below root, each as
// the names of its path below root, in name order (core's stream shard
// logs, STORAGE/streams/TENANT/NAMESPACE/STREAM/SHARD, are found the same
// way). A missing root has none; a directory that cannot be read is an
// error joined to the result, which still holds what could be read.
func WalkLevels(root string, levels int) ([][]string, error) {
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	paths := [][]string{nil}
	var err error
	for range levels {
		var next [][]string
		for _, p := range paths {
			names, e := subdirs(filepath.Join(root, filepath.Join(p...)))
			err = errors.Join(err, e)
			for _, n := range names {
				next = append(next, append(append([]string(nil), p...), n))
			}
		}
		paths = next
	}
	return paths, err
}

// subdirs returns the names of dir's subdirectories, sorted.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// ReadOffsetBase reads the offset base file of the incarnation in dir:
// the value added to a log offset to give the offset (and version) a
// client sees. found is false when there is no such file.
func ReadOffsetBase(dir string) (base uint64, found bool, err error) {
	p := filepath.Join(dir, OffsetBaseFile)
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	case len(b) != 8:
		return 0, true, fmt.Errorf("%s holds %d bytes, not 8", p, len(b))
	}
	return binary.BigEndian.Uint64(b), true, nil
}

// OffsetBaseBytes is the content of an offset base file holding base.
func OffsetBaseBytes(base uint64) []byte { return binary.BigEndian.AppendUint64(nil, base) }

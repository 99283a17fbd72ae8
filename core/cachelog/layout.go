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
	// Incarnation is the catalog's incarnation, "" for NoIncarnationDir.
	Incarnation string
	Dir         string
}

// FindIncarnations lists the cache incarnation directories under
// storage (STORAGE/caches/TENANT/NAMESPACE/CACHE/INCARNATION_DIR), in
// name order. A storage directory without caches has none. Directories
// at the incarnation level whose names are not incarnation directories
// are left out; an unreadable directory is an error joined to the
// result, which still lists what could be read.
func FindIncarnations(storage string) ([]Incarnation, error) {
	root := filepath.Join(storage, CachesDir)
	tenants, err := subdirs(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var out []Incarnation
	for _, t := range tenants {
		nss, e1 := subdirs(filepath.Join(root, t))
		err = errors.Join(err, e1)
		for _, ns := range nss {
			caches, e2 := subdirs(filepath.Join(root, t, ns))
			err = errors.Join(err, e2)
			for _, c := range caches {
				incs, e3 := subdirs(filepath.Join(root, t, ns, c))
				err = errors.Join(err, e3)
				for _, d := range incs {
					inc, ok := strings.CutPrefix(d, incarnationDir)
					if !ok && d != NoIncarnationDir {
						continue
					}
					out = append(out, Incarnation{Tenant: t, Namespace: ns, Cache: c, Incarnation: inc, Dir: filepath.Join(root, t, ns, c, d)})
				}
			}
		}
	}
	return out, err
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

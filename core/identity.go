package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/felixmq/felix/internal/atomicfile"
)

// StreamIdentity names what a durable stream's files were written for:
// one incarnation of the stream in one cluster. The control plane assigns
// both (wire.CatalogPage.ClusterID, wire.StreamSpec.Incarnation); a broker
// writes them beside the shard logs, in the stream directory's IDENTITY
// file, and deletes the files only when a delete names the same identity.
//
// An empty Cluster is a broker or control plane that predates cluster
// ids: it matches any cluster, and is filled in when the stream is next
// opened under a named one. An empty Incarnation is a stream created
// before incarnations: it matches only another empty one.
type StreamIdentity struct {
	Cluster     string `json:"cluster_id"`
	Incarnation string `json:"incarnation"`
}

func (id StreamIdentity) String() string {
	return fmt.Sprintf("cluster %q incarnation %q", id.Cluster, id.Incarnation)
}

// matches reports whether files written for id may serve want.
func (id StreamIdentity) matches(want StreamIdentity) bool {
	return id.Incarnation == want.Incarnation && (id.Cluster == "" || want.Cluster == "" || id.Cluster == want.Cluster)
}

// identityFile is the name of the identity file in a stream directory.
const identityFile = "IDENTITY"

// orphanedDir returns where the files of a stream's incarnation that
// another incarnation displaced are kept: <root>/orphaned/<tenant>/
// <namespace>/<stream>/<cluster>/<incarnation>, "-" standing for an
// empty part.
func orphanedDir(root string, k StreamKey, id StreamIdentity) string {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	return filepath.Join(root, "orphaned", k.Tenant, k.Namespace, k.Stream, dash(id.Cluster), dash(id.Incarnation))
}

// readIdentity reads the identity of the files in dir. A directory
// without an IDENTITY file was written before identities existed and
// reads as the empty identity; ok is false when dir does not exist.
func readIdentity(dir string) (id StreamIdentity, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, identityFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return StreamIdentity{}, false, nil
			}
			return StreamIdentity{}, false, err
		}
		return StreamIdentity{}, true, nil
	case err != nil:
		return StreamIdentity{}, false, err
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return StreamIdentity{}, false, fmt.Errorf("%s: %w", filepath.Join(dir, identityFile), err)
	}
	return id, true, nil
}

// writeIdentity records id in dir (which exists) so that a crash leaves
// either the old file or the new one.
func writeIdentity(dir string, id StreamIdentity) error {
	b, err := json.Marshal(id)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, identityFile), append(b, '\n'), 0o644)
}

// holdsData reports whether dir has anything but identity files: a
// directory a crash left between its creation and its first log holds
// nothing worth keeping.
func holdsData(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if n := e.Name(); n != identityFile && n != identityFile+".tmp" {
			return true, nil
		}
	}
	return false, nil
}

// moveDir renames from to to, creating to's parent, and syncs both
// parents so the move survives a crash.
func moveDir(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(filepath.Dir(to)); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(from))
}

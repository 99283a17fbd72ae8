package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/felixmq/felix/raftmeta/catalog"
)

// LegacyCatalogFile is the name of the single-node catalog file that
// earlier releases kept in the data directory.
const LegacyCatalogFile = "controlplane.db"

// MigrateLegacyCatalog moves the single-node catalog at path (tenants,
// namespaces, streams, caches and meta, signing keys included) into the
// Raft store, once: the whole catalog is one Raft entry that applies only
// to an empty store. On success the file is renamed to <path>.migrated.
// A missing file is not an error. When the store already holds a catalog
// the file is left where it is and a warning logged.
func MigrateLegacyCatalog(ctx context.Context, store *RaftStore, path string, log *slog.Logger) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("legacy catalog %s: %w", path, err)
	}
	old, err := catalog.OpenCatalog(path) // the old file has the catalog's bucket layout
	if err != nil {
		return fmt.Errorf("legacy catalog: %w", err)
	}
	imp, err := old.Export()
	old.Close()
	if err != nil {
		return fmt.Errorf("legacy catalog %s: %w", path, err)
	}
	loaded, err := store.Import(ctx, *imp)
	if err != nil {
		return fmt.Errorf("move legacy catalog %s into the Raft store: %w", path, err)
	}
	if !loaded {
		log.Warn("not moving the single-node catalog: the Raft store already holds one; the old file is left in place", "file", path)
		return nil
	}
	if err := os.Rename(path, path+".migrated"); err != nil {
		return fmt.Errorf("legacy catalog moved, but renaming %s failed: %w", path, err)
	}
	log.Info("moved the single-node catalog into the Raft store",
		"tenants", len(imp.Tenants), "namespaces", len(imp.Namespaces), "streams", len(imp.Streams),
		"caches", len(imp.Caches), "meta_keys", len(imp.Meta), "old_file", path+".migrated")
	return nil
}

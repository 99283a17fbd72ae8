package core

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// claimStreamDir readies the stream's directory for the files of want
// before its shard logs open. Files of another identity found there are
// moved aside to orphanedDir, never deleted; files of want moved aside
// earlier come back. An error leaves the stream unable to open its logs.
func (c *StorageConfig) claimStreamDir(k StreamKey, want StreamIdentity) error {
	dir := streamDir(c.Dir, k)
	have, ok, err := readIdentity(dir)
	if err != nil {
		return err
	}
	if ok && !have.matches(want) {
		if err := c.setAside(dir, k, have, want); err != nil {
			return err
		}
		ok = false
	}
	if !ok {
		back := orphanedDir(c.Dir, k, want)
		if _, err := os.Stat(back); err == nil {
			if err := moveDir(back, dir); err != nil {
				return fmt.Errorf("restoring %s from %s: %w", dir, back, err)
			}
			c.logger().Warn("durable stream is back in the catalog; its files, set aside earlier, are served again",
				"stream", k.Stream, "tenant", k.Tenant, "namespace", k.Namespace, "identity", want.String(), "dir", dir)
			return c.claimStreamDir(k, want)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return writeIdentity(dir, want)
	}
	if fresh := (StreamIdentity{Cluster: orElse(have.Cluster, want.Cluster), Incarnation: want.Incarnation}); fresh != have || !hasIdentityFile(dir) {
		return writeIdentity(dir, fresh)
	}
	return nil
}

// orElse returns a unless it is empty, then b.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func hasIdentityFile(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, identityFile))
	return err == nil
}

// setAside moves the files of have out of the way of want. A directory
// holding nothing but an identity (a crash left it before any log) is
// simply removed.
func (c *StorageConfig) setAside(dir string, k StreamKey, have, want StreamIdentity) error {
	data, err := holdsData(dir)
	if err != nil {
		return err
	}
	if !data {
		return os.RemoveAll(dir)
	}
	aside := orphanedDir(c.Dir, k, have)
	if _, err := os.Stat(aside); err == nil {
		return fmt.Errorf("files of %s are in %s, and %s already holds a copy set aside earlier; move one of them away", have, dir, aside)
	}
	if err := moveDir(dir, aside); err != nil {
		return fmt.Errorf("setting aside %s: %w", dir, err)
	}
	c.logger().Warn("durable stream's files belong to another incarnation of its name; set them aside, not deleted",
		"stream", k.Stream, "tenant", k.Tenant, "namespace", k.Namespace,
		"files", have.String(), "catalog", want.String(), "kept_in", aside)
	return nil
}

// deleteStreamFiles deletes the files of the stream's incarnation id, in
// its directory or set aside, and nothing else: files of another identity
// stay. It reports what it deleted.
func (c *StorageConfig) deleteStreamFiles(k StreamKey, id StreamIdentity) (deleted []string) {
	dir := streamDir(c.Dir, k)
	have, ok, err := readIdentity(dir)
	switch {
	case err != nil:
		c.logger().Error("not deleting a deleted stream's files: its identity cannot be read", "dir", dir, "err", err)
	case ok && have.matches(id):
		if err := os.RemoveAll(dir); err != nil {
			c.logger().Warn("removing a deleted stream's logs", "dir", dir, "err", err)
		} else {
			deleted = append(deleted, dir)
		}
	case ok:
		c.logger().Warn("not deleting durable files of another incarnation than the deleted one",
			"dir", dir, "files", have.String(), "deleted", id.String())
	}
	if aside := orphanedDir(c.Dir, k, id); id.Cluster != "" || id.Incarnation != "" {
		if _, err := os.Stat(aside); err == nil {
			if err := os.RemoveAll(aside); err != nil {
				c.logger().Warn("removing a deleted stream's logs", "dir", aside, "err", err)
			} else {
				deleted = append(deleted, aside)
			}
		}
	}
	return deleted
}

// HeldStream is a stream directory on disk that no served stream owns.
type HeldStream struct {
	Key      StreamKey
	Identity StreamIdentity
	Dir      string
}

// heldStreams lists the stream directories under the storage root that
// served does not own, and every directory set aside.
func (c *StorageConfig) heldStreams(served func(StreamKey) bool) ([]HeldStream, error) {
	var out []HeldStream
	err := walkDirs(filepath.Join(c.Dir, "streams"), 3, func(dir string, parts []string) error {
		k := StreamKey{Tenant: parts[0], Namespace: parts[1], Stream: parts[2]}
		if served(k) {
			return nil
		}
		id, _, err := readIdentity(dir)
		if err != nil {
			return err
		}
		out = append(out, HeldStream{Key: k, Identity: id, Dir: dir})
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = walkDirs(filepath.Join(c.Dir, "orphaned"), 5, func(dir string, parts []string) error {
		id, _, err := readIdentity(dir)
		if err != nil {
			return err
		}
		out = append(out, HeldStream{Key: StreamKey{Tenant: parts[0], Namespace: parts[1], Stream: parts[2]}, Identity: id, Dir: dir})
		return nil
	})
	return out, err
}

// walkDirs calls fn for every directory depth levels below root, with the
// names on the way. A missing root holds nothing.
func walkDirs(root string, depth int, fn func(dir string, parts []string) error) error {
	var walk func(dir string, parts []string) error
	walk = func(dir string, parts []string) error {
		if len(parts) == depth {
			return fn(dir, slices.Clone(parts))
		}
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() {
				if err := walk(filepath.Join(dir, e.Name()), append(parts, e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root, nil)
}

package core

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	"github.com/felixmq/felix/internal/atomicfile"
	"github.com/felixmq/felix/wire"
)

// A cache on a broker with durable storage is log-backed: its CacheStore
// lives in Dir/caches/<tenant>/<namespace>/<cache>/<incarnation dir>
// (cachelog's layout), one log per cache (every shard of it this broker
// holds), beside a file cachelog.OffsetBaseFile that fixes the cache's first offset. The cache's
// offsets (watch offsets and versions) are the log's offsets plus that
// base: the creation time in Unix nanoseconds, as an in-memory cache's
// first offset is, so a resume offset or version of an earlier cache of
// the same name reads as older than this one's history, never as one of
// its writes.
const (
	// DefaultCacheCompactInterval is how often a durable cache considers
	// compacting its log.
	DefaultCacheCompactInterval = 30 * time.Second
)

// incarnationDirRE is what an incarnation may look like to name a
// directory.
var incarnationDirRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CacheDir returns the directory of a cache incarnation's files under
// root.
func CacheDir(root string, k CacheKey, incarnation string) (string, error) {
	if incarnation != "" && !incarnationDirRE.MatchString(incarnation) {
		return "", fmt.Errorf("cache %s: incarnation %q cannot name a directory", k.Cache, incarnation)
	}
	return filepath.Join(root, cachelog.CachesDir, k.Tenant, k.Namespace, k.Cache, cachelog.IncarnationDirName(incarnation)), nil
}

// cacheLogOptions are the options of a cache's log (or its counter log)
// in dir: the broker's segment size, fsync policy, index bound and
// compaction interval.
func (c *StorageConfig) cacheLogOptions(dir string) StoreLogOptions {
	every := c.CacheCompactInterval
	if every == 0 {
		every = DefaultCacheCompactInterval
	}
	return StoreLogOptions{Dir: dir, SegmentBytes: c.SegmentBytes, Fsync: c.Fsync, FsyncInterval: c.FsyncInterval,
		MaxIndexBytes: c.CacheIndexBytes, CompactEvery: max(every, 0), FS: c.FS, Logger: c.logger()}
}

// durableCaches reports whether caches are log-backed.
func (c *StorageConfig) durableCaches() bool { return c != nil && c.Dir != "" }

// openCacheStore opens (or creates) the store of a cache incarnation and
// returns it with the cache's offset base.
func (b *Broker) openCacheStore(k CacheKey, incarnation string) (*CacheStore, uint64, error) {
	c := b.cfg.Storage
	dir, err := CacheDir(c.Dir, k, incarnation)
	if err != nil {
		return nil, 0, err
	}
	base, err := readOffsetBase(dir)
	if err != nil {
		return nil, 0, err
	}
	st, err := OpenCacheStore(CacheStoreOptions{StoreLogOptions: c.cacheLogOptions(dir), metrics: b.cfg.metrics, ownerSweeps: true})
	if err != nil {
		return nil, 0, err
	}
	return st, base, nil
}

// readOffsetBase reads the cache's offset base, creating the directory
// and writing the base (now, in Unix ns) if it has none. A directory
// whose log exists without a base file (written by hand) has base 0.
func readOffsetBase(dir string) (uint64, error) {
	base, found, err := cachelog.ReadOffsetBase(dir)
	if found || err != nil {
		return base, err
	}
	if _, err := os.Stat(filepath.Join(dir, cachelog.LogDir)); err == nil {
		return 0, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	base = uint64(time.Now().UnixNano())
	if err := atomicfile.Write(filepath.Join(dir, cachelog.OffsetBaseFile), cachelog.OffsetBaseBytes(base), 0o644); err != nil {
		return 0, err
	}
	return base, nil
}

// attachStore makes c log-backed: it loads every live entry of st (expired
// ones too: the sweep writes their expiry) and continues st's offsets. It
// runs before c is shared.
func (c *Cache) attachStore(st *CacheStore, base uint64) error {
	c.store, c.log.offBase = st, base
	c.log.next = base + st.NextOffset()
	c.log.setReleasedLocked(c.log.next) // what the log holds at open is durable
	st.SetOnDurable(c.logDurable)
	per := st.Len()/len(c.shards) + st.Len()/len(c.shards)/8 // keys hash evenly; no rehashing while they load
	for i := range c.shards {
		c.shards[i].m = make(map[string]cacheEntry, per)
	}
	return st.ScanLive(func(key string, value []byte, version uint64, expiresAt int64) {
		s := c.shard(key)
		s.m[key] = cacheEntry{value: value, expiresAt: expiresAt, offset: base + version}
		c.entries.Add(1)
		c.bytes.Add(entrySize(key, value))
	})
}

// closeStore closes a durable cache's log, keeping its files.
func (c *Cache) closeStore() {
	c.closeCounters()
	if c.store == nil {
		return
	}
	if err := c.store.Close(); err != nil {
		c.store.opts.Logger.Warn("closing a durable cache's log", "cache", c.key.Cache, "err", err)
	}
}

// logHistory reads the released changes [from, released) matching w from
// the cache's log, for a watch resuming before the in-memory history (the
// caller holds logMu, so no change is released meanwhile). ok is false, and the watch
// must resnapshot, when from was compacted away or is older than the
// cache, or when the changes pass the watch's byte bound or the read
// passes four times it: a resume that far back costs less as a
// resnapshot.
func (c *Cache) logHistory(from uint64, w *CacheWatch) ([]*CacheChange, bool) {
	l := &c.log
	if c.store == nil || from < l.offBase {
		return nil, false
	}
	at, end := from-l.offBase, l.released-l.offBase
	var out []*CacheChange
	var matched, scanned int64
	for at < end {
		chs, next, err := c.store.ReadChanges(at, end, 4096, 4<<20)
		if err != nil || next <= at {
			return nil, false
		}
		for _, ch := range chs {
			ch.Offset += l.offBase
			scanned += ch.size()
			if w.matches(ch.Key) {
				out = append(out, ch)
				matched += ch.size()
			}
		}
		if matched > w.maxBytes || scanned > 4*max(w.maxBytes, l.env.historyBytes) {
			return nil, false
		}
		at = next
	}
	return out, true
}

// errCacheStorage refuses a durable cache whose log cannot be opened.
func errCacheStorage(k CacheKey, err error) *wire.Error {
	return withLogReason(wire.NewError(wire.CodeShardUnavailable, "cache %s/%s/%s: its log cannot be opened: %v", k.Tenant, k.Namespace, k.Cache, err), err)
}

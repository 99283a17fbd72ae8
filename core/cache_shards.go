package core

import "github.com/felixmq/felix/wire"

// A cache of more than one shard is spread over brokers: each holds the
// keys of the shards placed on it (a key's shard is wire.ShardForKey over
// the cache's shard count). These are the lock-shard-independent parts a
// broker uses when it loses one.

// Shards returns the cache's shard count from its spec (at least 1): a
// key's shard is wire.ShardForKey([]byte(key), Shards()).
func (c *Cache) Shards() uint32 { return max(c.placed.Load(), 1) }

// DropShard forgets shard of a cache of shards shards: the watches
// reading it end with cause (a *ShardMovedError when it moved), and its
// keys are removed. Watches reading it are the key watches of its keys,
// the prefix watches limited to it, and, when shards > 1, every prefix
// watch limited to no shard (it reads them all).
//
// The removal is silent: it takes no offsets and sends no delete or
// expiry to any watch, because no watch left reads those keys, and the
// keys were not deleted (their owner now holds them). The change history
// is dropped with them, so a later resume that would replay changes of
// keys no longer held here starts from current values instead
// (resnapshot). It returns how many entries it removed.
//
// On a durable cache each removed key is also written to the log as a
// delete (taking an offset no watch is left to see), so that a restart
// does not bring back keys the broker no longer owns; a delete the log
// refuses still removes the key from memory. The shard's counters are
// forgotten the same way (a remove record each in the counter log; they
// then read as never written); a counter log that refuses them keeps
// them, and says so in the broker's log.
func (c *Cache) DropShard(shard, shards uint32, cause error) int {
	if shards == 0 {
		shards = 1
	}
	in := func(key string) bool { return wire.ShardForKey([]byte(key), shards) == shard }
	c.endShardWatches(shard, shards, in, cause)
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if !in(k) {
				continue
			}
			n++
			if c.store != nil {
				if err := c.removeLocked(s, k, e, wire.CacheOpDelete); err == nil {
					continue
				}
			}
			delete(s.m, k)
			c.entries.Add(-1)
			c.bytes.Add(-entrySize(k, e.value))
		}
		s.mu.Unlock()
	}
	c.forgetShardCounters(in)
	return n
}

// endShardWatches ends the watches reading shard with cause and drops the
// change history.
func (c *Cache) endShardWatches(shard, shards uint32, in func(string) bool, cause error) {
	l := &c.log
	l.logMu.Lock()
	var ended []*CacheWatch
	for key, ws := range l.keyed {
		if in(key) {
			ended = append(ended, ws...)
		}
	}
	for _, w := range l.prefix {
		if shards == 1 || w.shards <= 1 || w.shard == shard {
			ended = append(ended, w)
		}
	}
	for _, w := range ended {
		l.unregisterLocked(w)
	}
	if l.history != nil {
		l.history.release()
		l.history = nil
	}
	l.logMu.Unlock()
	for _, w := range ended {
		w.endWith(cause)
	}
}

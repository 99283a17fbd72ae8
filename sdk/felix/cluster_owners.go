package felix

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/felixmq/felix/wire"
)

// Owner cache bounds.
const (
	// ownerTTL is how long owners are used before they are asked again
	// (in the background, the old answer still used meanwhile).
	ownerTTL = 5 * time.Second
	// ownerWait is how long a call waits for the first answer about a
	// stream or cache before it goes through the entry broker.
	ownerWait = time.Second
	// ownerAskTimeout bounds one round of asking.
	ownerAskTimeout = 5 * time.Second
)

// ownerKey names a stream or a cache.
type ownerKey struct {
	kind      ShardKind
	namespace string
	name      string
}

// owners is what is known of one stream or cache: its shard count and
// each shard's owner address ("" when unknown or unavailable). shards 0
// means nothing is known: route through the entry broker.
type owners struct {
	shards uint32
	addrs  []string
}

// addr returns the owner of shard, or "".
func (o owners) addr(shard uint32) string {
	if int(shard) < len(o.addrs) {
		return o.addrs[shard]
	}
	return ""
}

// ownerEntry is one key's owners and the asking that fills them.
type ownerEntry struct {
	ready  chan struct{} // closed when the first ask ended
	cur    owners
	at     time.Time // when cur was learned
	asking bool      // an ask is under way
	stale  bool      // ask again on next use
}

// ownerCache remembers owners per stream and cache. Asks run in the
// background on goroutines the ClusterClient owns; concurrent users of
// one key share one ask.
type ownerCache struct {
	cc *ClusterClient

	mu sync.Mutex
	m  map[ownerKey]*ownerEntry
	// moved is closed, and replaced, when a shard's owner is learned to
	// be another broker than the one known (see movedC).
	moved chan struct{}
}

func newOwnerCache(cc *ClusterClient) *ownerCache {
	return &ownerCache{cc: cc, m: map[ownerKey]*ownerEntry{}, moved: make(chan struct{})}
}

// movedC returns a channel closed once some shard's owner is learned to
// be a broker other than the one known before: a resume waiting out its
// backoff tries again at once (a failover's new leader answering a
// publish, say, is news for a subscription of the same shard).
func (oc *ownerCache) movedC() <-chan struct{} {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.moved
}

// noteMovedLocked closes moved when next names an owner for a shard
// that prev named another for, or none. Caller holds oc.mu.
func (oc *ownerCache) noteMovedLocked(prev, next []string) {
	for i, a := range next {
		if a != "" && (i >= len(prev) || prev[i] != a) {
			close(oc.moved)
			oc.moved = make(chan struct{})
			return
		}
	}
}

// lookup returns what is known of k, asking the brokers when nothing is
// or it is old. The first caller for k waits for the answer up to
// ownerWait (or ctx); later callers never wait.
func (oc *ownerCache) lookup(ctx context.Context, k ownerKey) owners {
	oc.mu.Lock()
	e := oc.m[k]
	if e == nil {
		e = &ownerEntry{ready: make(chan struct{})}
		oc.m[k] = e
	}
	start := !e.asking && (e.at.IsZero() && !isClosed(e.ready) || e.stale || time.Since(e.at) > ownerTTL)
	if start {
		e.asking, e.stale = true, false
	}
	ready, cur := e.ready, e.cur
	oc.mu.Unlock()
	if start {
		oc.startAsk(k, e)
	}
	if isClosed(ready) {
		return cur
	}
	t := time.NewTimer(ownerWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
		return owners{}
	case <-ctx.Done():
		return owners{}
	}
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return e.cur
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// startAsk asks about k on a goroutine the client owns; e.asking is
// set. Once the client is closed nothing is asked, and e's waiters are
// let go.
func (oc *ownerCache) startAsk(k ownerKey, e *ownerEntry) {
	ask := func() {
		got, err := oc.ask(k)
		oc.finish(e, got, err)
	}
	if !oc.cc.spawn(ask) {
		oc.finish(e, owners{}, ErrClosed)
	}
}

// finish records the end of an ask of e.
func (oc *ownerCache) finish(e *ownerEntry, got owners, err error) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	e.asking = false
	if err == nil {
		if !e.at.IsZero() {
			oc.noteMovedLocked(e.cur.addrs, got.addrs)
		}
		e.cur, e.at = got, time.Now()
	} else if e.at.IsZero() {
		e.at = time.Now() // nothing learned: route through the entry broker until the TTL
	}
	if !isClosed(e.ready) {
		close(e.ready)
	}
}

// ask asks the entry broker for k's shard count and owners. A broker
// without the cluster features gives an empty answer: route through it.
func (oc *ownerCache) ask(k ownerKey) (owners, error) {
	cc := oc.cc
	ctx, cancel := context.WithTimeout(cc.ctx, ownerAskTimeout)
	defer cancel()
	c, err := cc.client(ctx)
	if err != nil {
		return owners{}, err
	}
	var n uint32
	if k.kind == KindCache {
		n, err = c.CacheShards(ctx, k.namespace, k.name)
	} else {
		n, err = c.StreamShards(ctx, k.namespace, k.name)
	}
	if err != nil || n == 0 {
		return owners{}, ignoreUnsupported(err)
	}
	list, err := c.ShardOwners(ctx, k.namespace, k.name, k.kind)
	if err != nil {
		return owners{shards: n}, ignoreUnsupported(err)
	}
	o := owners{shards: n, addrs: make([]string, n)}
	for _, so := range list {
		if so.Shard < n && so.Unavailable == "" {
			o.addrs[so.Shard] = so.Addr
		}
	}
	return o, nil
}

// ignoreUnsupported turns a broker's lack of a feature into an answer:
// there is nothing to learn from it.
func ignoreUnsupported(err error) error {
	var be *BrokerError
	if errors.As(err, &be) && be.Code == wire.CodeUnsupported {
		return nil
	}
	return err
}

// drop forgets shard's owner of k after it refused or failed a call,
// and has the owners asked again on next use.
func (oc *ownerCache) drop(k ownerKey, shard uint32) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	e := oc.m[k]
	if e == nil {
		return
	}
	if int(shard) < len(e.cur.addrs) && e.cur.addrs[shard] != "" {
		addrs := append([]string(nil), e.cur.addrs...) // lookups hold the old slice
		addrs[shard] = ""
		e.cur.addrs = addrs
	}
	e.stale = true
}

// refresh asks about k again now and waits for the answer (bounded by ctx
// and ownerWait).
func (oc *ownerCache) refresh(ctx context.Context, k ownerKey) owners {
	oc.mu.Lock()
	e := oc.m[k]
	if e == nil {
		oc.mu.Unlock()
		return oc.lookup(ctx, k)
	}
	start := !e.asking
	if start {
		e.ready = make(chan struct{})
		e.asking, e.stale = true, false
	}
	oc.mu.Unlock()
	if start {
		oc.startAsk(k, e)
	}
	return oc.lookup(ctx, k)
}

// learn records addr as shard's owner of k, as a not_leader named it.
func (oc *ownerCache) learn(k ownerKey, shard uint32, addr string) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	e := oc.m[k]
	if e == nil || int(shard) >= len(e.cur.addrs) {
		return
	}
	addrs := append([]string(nil), e.cur.addrs...)
	addrs[shard] = addr
	oc.noteMovedLocked(e.cur.addrs, addrs)
	e.cur.addrs = addrs
}

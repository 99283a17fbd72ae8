package broker

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/wire"
)

// cache_keys in a cluster. A cache's keys live on the owners of its
// shards, so one page is a merge: the entry broker lists what it holds
// (the shards it owns) and asks every other owner for the same page
// (fwd_cache carrying the cache_keys request; the owner checks the token
// again and lists the shards it owns). Each source answers keys after
// `after` in order, at most `limit`. A source that has more keys than it
// sent may hold keys below another source's last one, so the merged page
// stops at the smallest last key of the sources with more: nothing is
// skipped and nothing repeats across pages.

// cacheKeysCallTimeout bounds a cache_keys page's calls to the owners.
const cacheKeysCallTimeout = 10 * time.Second

// keysPage is one source's answer.
type keysPage struct {
	keys []string
	more bool
}

// clusterCacheKeys answers m from every owner of the cache's shards; c
// is the local cache (the shards this broker owns).
func (cs *controlStream) clusterCacheKeys(m *wire.CacheKeys, c *core.Cache, limit int) {
	srv := cs.srv
	owners := map[string]Route{}
	for shard := range max(c.Shards(), 1) {
		rt := srv.route(cs.ctx, wire.ShardKindCache, m.TenantID, m.Namespace, m.Cache, shard)
		switch {
		case rt.Local:
		case rt.NodeID == "" || !srv.canForward(rt):
			cs.sendError(rt.Err(wire.ShardKindCache, m.Cache, shard), &m.RequestID)
			return
		default:
			owners[rt.NodeID] = rt
		}
	}
	keys, more := c.Keys(m.Prefix, m.After, limit, time.Now())
	pages := []keysPage{{keys: keys, more: more}}
	if len(owners) > 0 {
		remote, e := srv.ownersCacheKeys(cs.ctx, cs.token, m, limit, owners)
		if e != nil {
			cs.sendError(e, &m.RequestID)
			return
		}
		pages = append(pages, remote...)
	}
	keys, more = mergeKeyPages(pages, limit)
	page := &wire.CacheKeysPage{Keys: keys, RequestID: m.RequestID}
	if more && len(keys) > 0 {
		next := keys[len(keys)-1]
		page.Next = &next
	}
	cs.sendMsg(page)
}

// ownersCacheKeys asks each owner for m's page, in parallel.
func (s *Server) ownersCacheKeys(ctx context.Context, token string, m *wire.CacheKeys, limit int, owners map[string]Route) ([]keysPage, *wire.Error) {
	ctx, cancel := context.WithTimeout(ctx, cacheKeysCallTimeout)
	defer cancel()
	ask := *m
	ask.Limit = limit
	body, err := wire.MarshalMessage(&ask)
	if err != nil {
		return nil, asWireError(err)
	}
	var (
		mu    sync.Mutex
		pages []keysPage
		first *wire.Error
		wg    sync.WaitGroup
	)
	for _, rt := range owners {
		// WithCodes: the owner's refusal keeps its code here; the client's
		// answer is rendered for what it negotiated by sendError.
		hdr, _ := json.Marshal(fwdCache{Token: token, TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache,
			WithCodes: true, Generation: rt.Generation})
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, e := s.ownerCacheKeys(ctx, rt, peer.Request{Type: TypeFwdCache, Header: hdr, Body: body})
			mu.Lock()
			defer mu.Unlock()
			if e != nil {
				if first == nil {
					first = e
				}
				return
			}
			pages = append(pages, p)
		}()
	}
	wg.Wait()
	return pages, first
}

// ownerCacheKeys makes one owner's call and reads its page.
func (s *Server) ownerCacheKeys(ctx context.Context, rt Route, req peer.Request) (keysPage, *wire.Error) {
	rep, e := s.forwardCall(ctx, rt, req, false)
	if e != nil {
		return keysPage{}, e
	}
	if rep.Err != nil {
		return keysPage{}, rep.Err
	}
	msg, err := wire.ParseMessage(rep.Body)
	if err != nil {
		return keysPage{}, asWireError(err)
	}
	switch a := msg.(type) {
	case *wire.CacheKeysPage:
		return keysPage{keys: a.Keys, more: a.Next != nil}, nil
	case *wire.ErrorMsg:
		return keysPage{}, a.Err()
	}
	return keysPage{}, wire.NewError(wire.CodeInternal, "%s answered cache_keys with %s", rt.NodeID, msg.MessageType())
}

// mergeKeyPages merges sorted pages into one page of at most limit keys
// and says whether more keys remain after it.
func mergeKeyPages(pages []keysPage, limit int) ([]string, bool) {
	var (
		all    []string
		cutoff string
		capped bool // some source has keys after its last one sent
	)
	for _, p := range pages {
		all = append(all, p.keys...)
		if p.more && len(p.keys) > 0 {
			last := p.keys[len(p.keys)-1]
			if !capped || last < cutoff {
				cutoff = last
			}
			capped = true
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	more := capped
	if capped {
		n, _ := slices.BinarySearch(all, cutoff)
		all = all[:n+1] // cutoff itself is in all
	}
	if len(all) > limit {
		all, more = all[:limit], true
	}
	if all == nil {
		all = []string{}
	}
	return all, more
}

// serveForwardedCacheKeys answers a cache_keys another broker forwarded:
// the keys of the shards this broker owns, after the token is checked
// again for cache.read over the prefix.
func (s *Server) serveForwardedCacheKeys(ctx context.Context, h fwdCache, m *wire.CacheKeys) peer.Reply {
	answer := func(msg wire.Message) peer.Reply {
		b, err := wire.MarshalMessage(msg)
		if err != nil {
			return peer.ErrorReply(asWireError(err))
		}
		return peer.Reply{Body: b}
	}
	refuse := func(e *wire.Error) peer.Reply {
		em := e.ErrorMessage(h.WithCodes)
		em.RequestID = &m.RequestID
		return answer(em)
	}
	if err := m.Validate(); err != nil {
		return refuse(asWireError(err))
	}
	if m.TenantID != h.TenantID || m.Namespace != h.Namespace || m.Cache != h.Cache {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_cache: the header and the request name different caches"))
	}
	if _, e := s.checkForwarded(ctx, h.Token, m.TenantID, auth.ActionCacheRead, auth.CacheResource(m.TenantID, m.Namespace, m.Cache, m.Prefix+"*")); e != nil {
		return refuse(e)
	}
	c, e := s.resolveCache(m.TenantID, m.Namespace, m.Cache)
	if e != nil {
		return refuse(e)
	}
	limit := m.Limit
	if limit <= 0 {
		limit = defaultCacheKeysLimit
	}
	keys, more := c.Keys(m.Prefix, m.After, limit, time.Now())
	page := &wire.CacheKeysPage{Keys: keys, RequestID: m.RequestID}
	if page.Keys == nil {
		page.Keys = []string{}
	}
	if more && len(keys) > 0 {
		next := keys[len(keys)-1]
		page.Next = &next
	}
	return answer(page)
}

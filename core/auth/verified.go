package auth

import (
	"sync"
)

// verifiedCacheSize bounds the tokens whose signature check the Verifier
// remembers; past it the cache starts over.
const verifiedCacheSize = 4096

// verified is what checking a token's signature and parsing its claims
// produced, kept so that a token presented again (every REST call of a
// client, every stream it opens) costs a map lookup instead of an ES256
// verification. Time, tenant and revocation are still checked every time.
type verified struct {
	keys   *keySet // the key set the signature was checked against
	claims tokenClaims
	perms  *Matcher // immutable once compiled
}

// verifiedCache maps a token to its verified claims. It is only valid for
// the key set it was checked against: a new JWKS (a rotated-out key)
// invalidates every entry.
type verifiedCache struct {
	mu sync.Mutex
	m  map[string]*verified
}

func (c *verifiedCache) get(token string, keys *keySet) *verified {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[token]; e != nil && e.keys == keys {
		return e
	}
	return nil
}

func (c *verifiedCache) put(token string, e *verified) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= verifiedCacheSize {
		c.m = make(map[string]*verified)
	}
	c.m[token] = e
}

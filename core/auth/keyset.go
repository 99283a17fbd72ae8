package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keySet maps key ids to P-256 public keys. It is never mutated after
// parseJWKS returns; the Verifier swaps whole sets.
type keySet map[string]*ecdsa.PublicKey

// parseJWKS reads a {"keys":[...]} document. Keys that are not ECDSA
// P-256 signing keys are skipped so a set can carry keys for other uses;
// a key with private material makes the whole set invalid. A key without
// "kid" is filed under its RFC 7638 thumbprint.
func parseJWKS(b []byte) (keySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("auth: parse JWKS: %w", err)
	}
	ks := make(keySet, len(set.Keys))
	for i, k := range set.Keys {
		if !k.IsPublic() {
			return nil, fmt.Errorf("auth: JWKS key %d (%q) holds private material", i, k.KeyID)
		}
		pub, ok := k.Key.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != string(jose.ES256) {
			continue
		}
		kid := k.KeyID
		if kid == "" {
			var err error
			if kid, err = thumbprintKID(pub); err != nil {
				return nil, err
			}
		}
		ks[kid] = pub
	}
	return ks, nil
}

// refetcher makes sure a burst of tokens with an unknown kid causes at most
// one JWKS fetch per interval, shared by every caller waiting on it.
type refetcher struct {
	mu       sync.Mutex
	inflight *fetchCall // the fetch now running, nil when none
	last     time.Time  // when the last fetch started; zero before the first
}

// fetchCall is one shared fetch; done is closed when it has finished.
type fetchCall struct {
	done chan struct{}
}

// refresh runs fetch unless one ran less than gap ago; callers arriving
// while a fetch runs wait for it (or for their ctx). It reports whether
// a fetch ran or was waited on. fetch is called without mu held.
func (r *refetcher) refresh(ctx context.Context, now time.Time, gap time.Duration, fetch func(context.Context)) bool {
	r.mu.Lock()
	if c := r.inflight; c != nil {
		r.mu.Unlock()
		select {
		case <-c.done:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !r.last.IsZero() && now.Sub(r.last) < gap && now.Sub(r.last) >= 0 {
		r.mu.Unlock()
		return false
	}
	c := &fetchCall{done: make(chan struct{})}
	r.inflight, r.last = c, now
	r.mu.Unlock()

	defer func() {
		r.mu.Lock()
		r.inflight = nil
		r.mu.Unlock()
		close(c.done)
	}()
	fetch(ctx)
	return true
}

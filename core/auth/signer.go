package auth

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Signer mints Felix tokens with its active key and publishes the public
// halves of all its keys as a JWKS. A Signer is safe for concurrent use.
type Signer struct {
	active *SigningKey
	keys   []*SigningKey // active first, then the others; no duplicate KIDs
	signer jose.Signer   // nil when err != nil
	err    error         // why the Signer cannot sign
}

// NewSigner returns a Signer that signs with active. The JWKS lists active
// and every key in others (older keys still accepted during a rotation).
// A nil active key yields a Signer whose Sign always fails.
func NewSigner(active *SigningKey, others ...*SigningKey) *Signer {
	s := &Signer{active: active}
	seen := map[string]bool{}
	for _, k := range append([]*SigningKey{active}, others...) {
		if k == nil || seen[k.kid] {
			continue
		}
		seen[k.kid] = true
		s.keys = append(s.keys, k)
	}
	if active == nil {
		s.err = errors.New("auth: signer has no active key")
		return s
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	key := jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: active.priv, KeyID: active.kid}}
	s.signer, s.err = jose.NewSigner(key, opts)
	return s
}

// Sign returns a compact JWT for c, signed with the active key. It sets
// iss and aud, requires a non-zero Expiry and a TenantID, checks every
// permission with CompilePerms and CheckActions (an unknown action is
// refused), fills IssuedAt (now), NotBefore
// (IssuedAt) and ID (random) when they are empty.
func (s *Signer) Sign(c Claims) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	if err := checkClaims(&c); err != nil {
		return "", err
	}
	tok, err := jwt.Signed(s.signer).Claims(toTokenClaims(c)).Serialize()
	if err != nil {
		return "", fmt.Errorf("auth: sign token: %w", err)
	}
	return tok, nil
}

// checkClaims validates c and fills its defaults in place.
func checkClaims(c *Claims) error {
	if c.Expiry.IsZero() {
		return errors.New("auth: token needs an expiry")
	}
	if c.TenantID == "" {
		return errors.New("auth: token needs a tenant id")
	}
	if _, err := CompilePerms(c.Perms); err != nil {
		return err
	}
	if err := CheckActions(c.Perms); err != nil {
		return err
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = time.Now()
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = c.IssuedAt
	}
	if c.ID == "" {
		id, err := randomID()
		if err != nil {
			return err
		}
		c.ID = id
	}
	return nil
}

func randomID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("auth: token id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// JWKS returns {"keys":[...]} with the public JWK of every key, active
// first. It never contains private material.
func (s *Signer) JWKS() ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(s.keys))}
	for _, k := range s.keys {
		set.Keys = append(set.Keys, k.publicJWK())
	}
	b, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("auth: marshal JWKS: %w", err)
	}
	return b, nil
}

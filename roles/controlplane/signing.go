package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/felixmq/felix/core/auth"
)

// retiredKey is a signing key that no longer signs but still verifies.
// A key may have signed a token the moment before it was retired, and
// the longest token the control plane mints lives maxTokenTTL (POST
// .../tokens; exchanged tokens live at most a day), so it is kept until
// RetiredAt + maxTokenTTL + the brokers' clock leeway.
type retiredKey struct {
	PEM       string `json:"pem"`
	RetiredAt int64  `json:"retired_at"` // Unix seconds
	DropAfter int64  `json:"drop_after"` // Unix seconds
}

// retiredKeyLife is how long a retired key stays in the JWKS.
const retiredKeyLife = maxTokenTTL*time.Second + auth.DefaultLeeway

func retire(k *auth.SigningKey, now time.Time) (retiredKey, error) {
	b, err := k.MarshalPEM()
	if err != nil {
		return retiredKey{}, err
	}
	return retiredKey{PEM: string(b), RetiredAt: now.Unix(), DropAfter: now.Add(retiredKeyLife).Unix()}, nil
}

// keepRetired drops the keys whose tokens have all expired, and beyond
// maxRetiredKeys the oldest (their tokens stop verifying: logged).
func (s *Service) keepRetired(keys []retiredKey, now time.Time) []retiredKey {
	out := keys[:0:0]
	for _, k := range keys {
		if now.Unix() <= k.DropAfter {
			out = append(out, k)
		}
	}
	if len(out) > maxRetiredKeys {
		s.log.Warn("dropping retired signing keys before their tokens expire: too many rotations",
			"kept", maxRetiredKeys, "dropped", len(out)-maxRetiredKeys)
		out = out[:maxRetiredKeys]
	}
	return out
}

// loadRetired reads the retired keys, newest first. The format of
// earlier releases (a list of PEM strings) is read as keys retired now.
func (s *Service) loadRetired(ctx context.Context) ([]retiredKey, error) {
	raw, ok, err := s.store.Meta(ctx, metaRetiredKeys)
	if err != nil || !ok {
		return nil, err
	}
	var keys []retiredKey
	if err := json.Unmarshal(raw, &keys); err == nil {
		return keys, nil
	}
	var pems []string
	if err := json.Unmarshal(raw, &pems); err != nil {
		return nil, fmt.Errorf("stored retired signing keys: %w", err)
	}
	now := s.now()
	for _, p := range pems {
		keys = append(keys, retiredKey{PEM: p, RetiredAt: now.Unix(), DropAfter: now.Add(retiredKeyLife).Unix()})
	}
	return keys, nil
}

func (s *Service) storeRetired(ctx context.Context, keys []retiredKey) error {
	if keys == nil {
		keys = []retiredKey{}
	}
	raw, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	return s.store.PutMeta(ctx, metaRetiredKeys, raw)
}

func parseRetired(keys []retiredKey) ([]*auth.SigningKey, error) {
	out := make([]*auth.SigningKey, 0, len(keys))
	for _, k := range keys {
		sk, err := auth.ParseSigningKeyPEM([]byte(k.PEM))
		if err != nil {
			return nil, fmt.Errorf("stored retired signing key: %w", err)
		}
		out = append(out, sk)
	}
	return out, nil
}

// rotateResponse answers POST /v1/signing-keys/rotate.
type rotateResponse struct {
	KID  string   `json:"kid"`  // the new active key
	KIDs []string `json:"kids"` // every key in the JWKS, active first
}

func (s *Service) rotateKey(r *http.Request, _ *auth.Identity) (int, any, error) {
	if err := s.RotateSigningKey(r.Context()); err != nil {
		return 0, nil, err
	}
	jwks, err := s.JWKS(r.Context())
	if err != nil {
		return 0, nil, err
	}
	var doc struct {
		Keys []struct {
			KID string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &doc); err != nil {
		return 0, nil, err
	}
	resp := rotateResponse{KIDs: []string{}}
	for _, k := range doc.Keys {
		resp.KIDs = append(resp.KIDs, k.KID)
	}
	if len(resp.KIDs) > 0 {
		resp.KID = resp.KIDs[0]
	}
	return http.StatusOK, resp, nil
}

// reloadSigner re-reads the signing keys from the store (another member
// may have rotated them), makes them this member's, and returns the JWKS.
// The verifier calls it when a token names a key id it does not know.
func (s *Service) reloadSigner(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	active, err := s.loadActiveKey(ctx)
	if err != nil {
		return nil, err
	}
	retired, err := s.loadRetiredKeys(ctx)
	if err != nil {
		return nil, err
	}
	signer := auth.NewSigner(active, retired...)
	jwks, err := signer.JWKS()
	if err != nil {
		return nil, err
	}
	s.signer.Store(signer)
	s.log.Info("loaded signing keys rotated elsewhere", "kid", active.KID())
	return jwks, nil
}

package controlplane

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/felixmq/felix/core/auth"
)

// RotateSigningKey makes a new key the active signer. The previous active
// key stays in the JWKS (up to two retired keys are kept) so tokens it
// signed keep verifying until they expire.
func (s *Service) RotateSigningKey(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.loadActiveKey(ctx)
	if err != nil {
		return err
	}
	retired, err := s.loadRetiredKeys(ctx)
	if err != nil {
		return err
	}
	retired = append([]*auth.SigningKey{old}, retired...)
	retired = retired[:min(len(retired), maxRetiredKeys)]
	if err := s.storeRetiredKeys(ctx, retired); err != nil {
		return err
	}
	fresh, err := auth.GenerateSigningKey()
	if err != nil {
		return err
	}
	pemBytes, err := fresh.MarshalPEM()
	if err != nil {
		return err
	}
	if err := s.store.PutMeta(ctx, metaSigningKey, pemBytes); err != nil {
		return fmt.Errorf("store signing key: %w", err)
	}
	s.log.Info("rotated the token signing key", "kid", fresh.KID(), "previous", old.KID())
	return s.installSigner(fresh, retired)
}

func (s *Service) loadRetiredKeys(ctx context.Context) ([]*auth.SigningKey, error) {
	raw, ok, err := s.store.Meta(ctx, metaRetiredKeys)
	if err != nil || !ok {
		return nil, err
	}
	var pems []string
	if err := json.Unmarshal(raw, &pems); err != nil {
		return nil, fmt.Errorf("stored retired signing keys: %w", err)
	}
	keys := make([]*auth.SigningKey, 0, len(pems))
	for _, p := range pems {
		k, err := auth.ParseSigningKeyPEM([]byte(p))
		if err != nil {
			return nil, fmt.Errorf("stored retired signing key: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func (s *Service) storeRetiredKeys(ctx context.Context, keys []*auth.SigningKey) error {
	pems := make([]string, 0, len(keys))
	for _, k := range keys {
		b, err := k.MarshalPEM()
		if err != nil {
			return err
		}
		pems = append(pems, string(b))
	}
	raw, err := json.Marshal(pems)
	if err != nil {
		return err
	}
	return s.store.PutMeta(ctx, metaRetiredKeys, raw)
}

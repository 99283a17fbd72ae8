package controlplane

import (
	"context"
	"fmt"

	"github.com/felixmq/felix/core/auth"
)

// RotateSigningKey makes a new key the active signer. The previous active
// key stays in the JWKS until every token it can have signed has expired
// (see retiredKey); keys past that are dropped at the next rotation or
// start.
func (s *Service) RotateSigningKey(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.loadActiveKey(ctx)
	if err != nil {
		return err
	}
	retired, err := s.loadRetired(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	entry, err := retire(old, now)
	if err != nil {
		return err
	}
	retired = s.keepRetired(append([]retiredKey{entry}, retired...), now)
	if err := s.storeRetired(ctx, retired); err != nil {
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
	s.log.Info("rotated the token signing key", "kid", fresh.KID(), "previous", old.KID(), "retired_keys", len(retired))
	keys, err := parseRetired(retired)
	if err != nil {
		return err
	}
	return s.installSigner(fresh, keys)
}

// loadRetiredKeys returns the retired keys still needed now.
func (s *Service) loadRetiredKeys(ctx context.Context) ([]*auth.SigningKey, error) {
	retired, err := s.loadRetired(ctx)
	if err != nil {
		return nil, err
	}
	return parseRetired(s.keepRetired(retired, s.now()))
}

package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// metaClusterID holds the cluster's id, chosen at the store's first use.
const metaClusterID = "cluster_id"

// ClusterID returns the id of the cluster whose catalog this is, choosing
// it on the first call over a new store (PutMetaIfAbsent makes concurrent
// first calls, on any member, agree). It never changes afterwards; a
// catalog restored from a backup or imported keeps it, a new store gets
// another. Brokers compare it with the one their files were written for.
func (s *Service) ClusterID(ctx context.Context) (string, error) {
	if id := s.clusterID.Load(); id != nil {
		return *id, nil
	}
	v, ok, err := s.store.Meta(ctx, metaClusterID)
	if err != nil {
		return "", fmt.Errorf("read cluster id: %w", err)
	}
	if !ok {
		fresh := make([]byte, 16)
		if _, err := rand.Read(fresh); err != nil {
			return "", err
		}
		if v, err = s.store.PutMetaIfAbsent(ctx, metaClusterID, []byte(hex.EncodeToString(fresh))); err != nil {
			return "", fmt.Errorf("store cluster id: %w", err)
		}
	}
	id := string(v)
	s.clusterID.Store(&id)
	return id, nil
}

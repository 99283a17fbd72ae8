package catalogsync

import (
	"context"
	"errors"
	"slices"

	"github.com/felixmq/felix/wire"
)

// SyncKinds brings only the named kinds up to date, in wire.CatalogKinds
// order, as SyncOnce would; the JWKS and the revocations are left to the
// next full pass, and Synced does not change. It is the on-demand pass of
// a broker that misses a name: cheaper than SyncOnce, and serialised with
// it on the same token, so the two never run at once. It returns the
// failures of the pass joined.
func (s *Syncer) SyncKinds(ctx context.Context, kinds ...wire.CatalogKind) error {
	select {
	case <-s.passC:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { s.passC <- struct{}{} }()

	var errs []error
	for _, kind := range wire.CatalogKinds {
		if !slices.Contains(kinds, kind) {
			continue
		}
		applyErrs, err := s.syncKind(ctx, kind)
		errs = append(errs, applyErrs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

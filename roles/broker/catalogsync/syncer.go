package catalogsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// MaxPagesPerPass bounds the changes pages one kind reads in one pass.
const MaxPagesPerPass = 100

// defaultInterval is Run's period when NewSyncer gets none.
const defaultInterval = time.Second

// kindState is what the syncer knows of one kind.
type kindState struct {
	// snapshotted is false until a snapshot of the kind was applied.
	snapshotted bool
	// cursor is the sequence number the applied state reflects.
	cursor uint64
	// live maps the id of every resource applied and not removed to the
	// item that last put it.
	live map[string]wire.CatalogItem
}

// Syncer applies the catalog from a Source to an Applier.
type Syncer struct {
	// OnJWKS, when set, receives the JWKS fetched on every pass. Set it
	// before the first SyncOnce or Run.
	OnJWKS func(jwks []byte)
	// UnknownKindRetry is how long to wait before asking again for the
	// revocations feed after the control plane said it lacks it. Default
	// DefaultUnknownKindRetry. Set it before the first SyncOnce or Run.
	UnknownKindRetry time.Duration
	// OnSynced, when set, is called by Run after every pass once Synced
	// is true. Set it before Run.
	OnSynced func()

	src      Source
	apply    Applier
	interval time.Duration
	log      *slog.Logger

	// passC holds one token; whoever holds it runs a pass and owns kinds.
	passC  chan struct{}
	kinds  map[wire.CatalogKind]*kindState
	revs   revocationFeed
	synced atomic.Bool
	// cluster is the cluster the applied state came from ("" until a
	// page names one).
	cluster string
}

// NewSyncer returns a Syncer. interval is Run's period (default 1s); a nil
// log means slog.Default().
func NewSyncer(src Source, apply Applier, interval time.Duration, log *slog.Logger) *Syncer {
	if interval <= 0 {
		interval = defaultInterval
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Syncer{src: src, apply: apply, interval: interval, log: log,
		passC: make(chan struct{}, 1), kinds: map[wire.CatalogKind]*kindState{}}
	s.passC <- struct{}{}
	return s
}

// Synced reports whether a pass has completed with every fetch successful.
func (s *Syncer) Synced() bool { return s.synced.Load() }

// SyncOnce runs one pass over every kind, the JWKS and, for an Applier
// that is a RevocationApplier, the revocations feed (whose failures are
// logged, never returned, and never hold back Synced). It returns the
// failures of the pass joined; kinds that did not fail are synced anyway.
// Concurrent calls run one after the other.
func (s *Syncer) SyncOnce(ctx context.Context) error {
	select {
	case <-s.passC:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { s.passC <- struct{}{} }()

	var errs []error
	fetchFailed := false
	for _, kind := range wire.CatalogKinds {
		applyErrs, err := s.syncKind(ctx, kind)
		errs = append(errs, applyErrs...)
		if err != nil {
			fetchFailed = true
			errs = append(errs, err)
		}
	}
	if jwks, err := s.src.JWKS(ctx); err != nil {
		fetchFailed = true
		errs = append(errs, fmt.Errorf("catalogsync: jwks: %w", err))
	} else if s.OnJWKS != nil {
		s.OnJWKS(jwks)
	}
	if !fetchFailed {
		s.synced.Store(true)
	}
	s.syncRevocations(ctx)
	return errors.Join(errs...)
}

func (s *Syncer) state(kind wire.CatalogKind) *kindState {
	st := s.kinds[kind]
	if st == nil {
		st = &kindState{live: map[string]wire.CatalogItem{}}
		s.kinds[kind] = st
	}
	return st
}

// syncKind brings one kind up to date. fetchErr reports a failed or
// refused fetch (the cursor did not move past it); applyErrs the items the
// Applier refused.
func (s *Syncer) syncKind(ctx context.Context, kind wire.CatalogKind) (applyErrs []error, fetchErr error) {
	st := s.state(kind)
	if !st.snapshotted {
		return s.resnapshot(ctx, kind, st)
	}
	for range MaxPagesPerPass {
		page, err := s.src.Changes(ctx, kind, st.cursor)
		if err != nil {
			return applyErrs, fmt.Errorf("catalogsync: %s changes since %d: %w", kind, st.cursor, err)
		}
		if page.Reset || s.switchCluster(page) {
			errs, err := s.resnapshot(ctx, kind, st)
			return append(applyErrs, errs...), err
		}
		more, errs, err := s.applyChanges(kind, st, page)
		applyErrs = append(applyErrs, errs...)
		if err != nil || !more {
			return applyErrs, err
		}
	}
	return applyErrs, nil
}

// applyChanges applies one changes page and advances the cursor past it.
// more is false when the page was empty (the feed is drained).
func (s *Syncer) applyChanges(kind wire.CatalogKind, st *kindState, page *wire.CatalogPage) (more bool, applyErrs []error, err error) {
	if err := checkPage(kind, page); err != nil {
		return false, nil, err
	}
	if len(page.Items) == 0 {
		st.cursor = max(st.cursor, page.Seq)
		return false, nil, nil
	}
	next := page.Seq
	for i := range page.Items {
		next = max(next, page.Items[i].Seq)
	}
	if next <= st.cursor {
		return false, nil, fmt.Errorf("catalogsync: %s changes page does not move past cursor %d", kind, st.cursor)
	}
	for i := range page.Items {
		it := &page.Items[i]
		id, _ := itemID(kind, it)
		if it.Op == wire.OpDelete {
			if known, ok := st.live[id]; ok && sameIncarnation(&known, it) {
				it = &known // the applied item carries the full resource
			}
			remove(s.apply, kind, it)
			delete(st.live, id)
			continue
		}
		if err := put(s.apply, kind, it); err != nil {
			applyErrs = append(applyErrs, err)
		}
		st.live[id] = *it
	}
	st.cursor = next
	return true, applyErrs, nil
}

// resnapshot replaces what the syncer knows of kind with a fresh
// snapshot: every item is applied, and known resources the snapshot lacks
// are removed.
func (s *Syncer) resnapshot(ctx context.Context, kind wire.CatalogKind, st *kindState) (applyErrs []error, fetchErr error) {
	page, err := s.src.Snapshot(ctx, kind)
	if err != nil {
		return nil, fmt.Errorf("catalogsync: %s snapshot: %w", kind, err)
	}
	if err := checkPage(kind, page); err != nil {
		return nil, err
	}
	s.switchCluster(page)
	live := make(map[string]wire.CatalogItem, len(page.Items))
	for i := range page.Items {
		it := &page.Items[i]
		if it.Op == wire.OpDelete {
			continue // a snapshot lists live resources only
		}
		if err := put(s.apply, kind, it); err != nil {
			applyErrs = append(applyErrs, err)
		}
		id, _ := itemID(kind, it)
		live[id] = *it
	}
	var vanished []string
	for id := range st.live {
		if _, ok := live[id]; !ok {
			vanished = append(vanished, id)
		}
	}
	slices.Sort(vanished)
	for _, id := range vanished {
		it := st.live[id]
		forget(s.apply, kind, &it)
	}
	st.live, st.cursor, st.snapshotted = live, page.Seq, true
	return applyErrs, nil
}

// switchCluster notes the cluster a page comes from. The first one named
// is handed to the Applier. A page from another cluster than the one the
// applied state came from means the source now answers for a different
// catalog: every kind is read again from a snapshot (this one now, the
// others on their next turn), so what the old catalog held and the new
// one lacks is forgotten, never deleted. It reports a switch.
func (s *Syncer) switchCluster(page *wire.CatalogPage) bool {
	id := page.ClusterID
	if id == "" || id == s.cluster {
		return false
	}
	old := s.cluster
	s.cluster = id
	s.apply.SetCluster(id)
	if old == "" {
		return false
	}
	s.log.Warn("the control plane answers for another cluster; following its catalog, and keeping without serving the data of streams only the old one held",
		"was", old, "now", id)
	for _, st := range s.kinds {
		st.snapshotted = false
	}
	return true
}

// sameIncarnation reports whether a delete item names the incarnation the
// syncer applied (or names none).
func sameIncarnation(known, del *wire.CatalogItem) bool {
	switch {
	case del.Stream != nil && known.Stream != nil && del.Stream.Incarnation != "":
		return del.Stream.Incarnation == known.Stream.Incarnation
	case del.Cache != nil && known.Cache != nil && del.Cache.Incarnation != "":
		return del.Cache.Incarnation == known.Cache.Incarnation
	}
	return true
}

// Run calls SyncOnce now and then every interval until ctx ends. A failure
// is logged when it first appears or changes, and the recovery once.
func (s *Syncer) Run(ctx context.Context) {
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	var streak string // message of the failure last logged; "" when healthy
	wasSynced := false
	for {
		err := s.SyncOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		streak = s.report(err, streak)
		if !wasSynced && s.Synced() {
			wasSynced = true
			s.log.Info("catalog synced")
		}
		if wasSynced && s.OnSynced != nil {
			s.OnSynced()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// report logs err unless it repeats the streak being reported and returns
// the new streak.
func (s *Syncer) report(err error, streak string) string {
	if err == nil {
		if streak != "" {
			s.log.Info("catalog sync recovered")
		}
		return ""
	}
	if msg := err.Error(); msg != streak {
		s.log.Warn("catalog sync failed; retrying", "err", err)
		return msg
	}
	return streak
}

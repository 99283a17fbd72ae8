package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/controlplane/placement"
	"github.com/felixmq/felix/wire"
)

// pPlacementAbandon is the operator's way out for a durable shard that
// waits for copies that will not come back (felix admin placement
// abandon; docs/placement.md, "Abandoning a shard").
const pPlacementAbandon = pPlacementStream + "/shards/{shard}/abandon"

// abandonRetries bounds the retries of an abandon that raced a placement
// pass (the change is computed again against what the pass wrote).
const abandonRetries = 3

// postAbandon serves POST .../shards/{shard}/abandon[?dry_run=true].
func (s *Service) postAbandon(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace", "stream")
	if err != nil {
		return 0, nil, err
	}
	shard, err := strconv.ParseUint(r.PathValue("shard"), 10, 32)
	if err != nil {
		return 0, nil, invalid("shard: " + strconv.Quote(r.PathValue("shard")) + " is not a shard number")
	}
	dry := false
	if v := r.URL.Query().Get("dry_run"); v != "" {
		if dry, err = strconv.ParseBool(v); err != nil {
			return 0, nil, invalid("dry_run: " + strconv.Quote(v) + " is not true or false")
		}
	}
	var keep []string
	for _, v := range r.URL.Query()["keep"] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				keep = append(keep, id)
			}
		}
	}
	if len(keep) > maxReplication {
		return 0, nil, invalid(fmt.Sprintf("keep: %d brokers named; at most %d", len(keep), maxReplication))
	}
	ref := placement.ShardRef{Resource: placement.ResourceKey{Kind: placement.KindStream, TenantID: n[0], Namespace: n[1], Name: n[2]},
		Shard: uint32(shard)}
	res, err := s.Abandon(r.Context(), ref, dry, keep...)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

// Abandon gives up the copies of a waiting durable shard that only down
// brokers hold, keeping those of the live brokers named in keep, or of
// the live members of its set (placement.Abandon); with dryRun it only
// says what that would do. The change is a placement change guarded by the revision it
// was computed from, like a pass's; one that raced a pass is computed
// again.
func (s *Service) Abandon(ctx context.Context, ref placement.ShardRef, dryRun bool, keep ...string) (wire.PlacementAbandon, error) {
	for try := 1; ; try++ {
		in, err := s.store.PlacementInput(ctx)
		if err != nil {
			return wire.PlacementAbandon{}, err
		}
		res, err := placement.Abandon(placementInput(in), ref, keep...)
		var ae *placement.AbandonError
		if errors.As(err, &ae) {
			return wire.PlacementAbandon{}, &wire.Error{Code: codeConflict, Retry: wire.RetryFatal, Message: ae.Reason}
		}
		if err != nil {
			return wire.PlacementAbandon{}, err
		}
		out := wire.PlacementAbandon{DryRun: dryRun, Before: toRecord(res.Before), After: toRecord(res.After),
			Kept: res.Kept, Lost: res.Lost}
		if dryRun {
			return out, nil
		}
		err = s.store.ApplyPlacement(ctx, placementChange(in, res.Next))
		if errors.Is(err, ErrConflict) && try < abandonRetries {
			continue
		}
		if err != nil {
			return wire.PlacementAbandon{}, err
		}
		d := res.Decision
		s.log.Warn("placement", "decision", string(d.Kind), "shard", d.Shard.Resource.String()+"#"+strconv.FormatUint(uint64(d.Shard.Shard), 10),
			"generation", d.Generation, "from", d.From, "to", d.To, "kept", res.Kept, "lost", res.Lost,
			"note", "records only the lost copies held are gone")
		return out, nil
	}
}

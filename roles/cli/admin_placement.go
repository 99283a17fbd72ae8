package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/wire"
)

// StreamPlacement reads where each shard of a stream is placed
// (GET /v1/placement/streams/{tenant}/{namespace}/{stream}).
func (a *AdminClient) StreamPlacement(ctx context.Context, tenant, ns, stream string) (wire.PlacementView, error) {
	var v wire.PlacementView
	err := a.do(ctx, http.MethodGet, apiPath("placement", "streams", tenant, ns, stream), nil, nil, &v)
	return v, err
}

// CachePlacement reads where each shard of a cache is placed
// (GET /v1/placement/caches/{tenant}/{namespace}/{cache}).
func (a *AdminClient) CachePlacement(ctx context.Context, tenant, ns, cache string) (wire.PlacementView, error) {
	var v wire.PlacementView
	err := a.do(ctx, http.MethodGet, apiPath("placement", "caches", tenant, ns, cache), nil, nil, &v)
	return v, err
}

// Replication reads every replicated durable shard's copies and their
// reported positions (GET /v1/placement/replication; cluster.manage).
func (a *AdminClient) Replication(ctx context.Context) (wire.ReplicationView, error) {
	var v wire.ReplicationView
	err := a.do(ctx, http.MethodGet, apiPath("placement", "replication"), nil, nil, &v)
	return v, err
}

// placementShow is what `placement show -o json` prints: the placement
// view, and the replication of its shards when the caller may read it.
type placementShow struct {
	wire.PlacementView
	// Replication holds, per shard with followers, each copy's last
	// reported position and each follower's lag.
	Replication []wire.ShardReplication `json:"replication,omitempty"`
}

// replicationOf reads the replication of v's shards. Without
// cluster.manage (forbidden) there is none to show, and that is no error.
func replicationOf(ctx context.Context, a *AdminClient, v wire.PlacementView) ([]wire.ShardReplication, error) {
	all, err := a.Replication(ctx)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []wire.ShardReplication
	for _, r := range all.Shards {
		if r.Kind == v.Kind && r.TenantID == v.TenantID && r.Namespace == v.Namespace && r.Name == v.Name {
			out = append(out, r)
		}
	}
	return out, nil
}

func placementCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "placement",
		Usage:     "show which broker owns each shard of a stream or cache, and its followers",
		UsageText: "felix admin placement show STREAM [-o json]\nfelix admin placement show --cache CACHE [-o json]",
		Description: "The control plane places every shard of every stream and cache on one broker, its owner\n" +
			"(the leader), at a generation that grows with each change of owner; a durable stream with a\n" +
			"replication factor above 1 also gets up to factor - 1 followers on other brokers. Examples:\n\n" +
			"   felix admin placement show events\n" +
			"   felix admin placement show --cache sessions -o json",
		Subcommands: []*cli.Command{placementShowCommand(), placementAbandonCommand()},
	})
}

func placementShowCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "show",
		Usage:     "show each shard's owner, followers, generation and state",
		ArgsUsage: "STREAM",
		UsageText: "felix admin placement show STREAM [-o json]\nfelix admin placement show --cache CACHE [-o json]",
		Description: "Lists every shard of STREAM (or of the cache named by --cache) in the tenant and namespace\n" +
			"of the settings: the owner's node id, its followers' node ids (\"-\": none), the generation,\n" +
			"and its state: serving, or why not (not_assigned, owner_down, storage_lost). For a shard\n" +
			"with followers, from the brokers' last heartbeats: END, the offset past the leader's last\n" +
			"record; DURABLE, how far each follower holds the log durably; LAG, END less DURABLE, per\n" +
			"follower in FOLLOWERS order (\"-\": not reported at the shard's generation, or no\n" +
			"cluster.manage to read them). -o json also gives each follower's storage identity and the\n" +
			"reports' ages. Needs cluster.manage, tenant.manage, or read access to the stream or cache.\n" +
			"Example:\n\n   felix admin placement show events",
		Flags: clientFlags(&cli.StringFlag{Name: "cache", Usage: "show the cache `CACHE` instead of a stream"}),
		Action: func(c *cli.Context) error {
			cache := c.String("cache")
			want := 1
			if cache != "" {
				want = 0
			}
			if err := needArgs(c, want, want); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				var (
					v   wire.PlacementView
					err error
				)
				if cache != "" {
					v, err = a.CachePlacement(c.Context, s.Tenant, s.Namespace, cache)
				} else {
					v, err = a.StreamPlacement(c.Context, s.Tenant, s.Namespace, c.Args().First())
				}
				if err != nil {
					return err
				}
				reps, err := replicationOf(c.Context, a, v)
				if err != nil {
					return err
				}
				return printPlacement(p, placementShow{PlacementView: v, Replication: reps})
			})
		},
	})
}

func printPlacement(p printer, v placementShow) error {
	if v.Shards == nil {
		v.Shards = []wire.ShardAssignment{}
	}
	if p.json {
		return p.JSON(v)
	}
	reps := make(map[uint32]wire.ShardReplication, len(v.Replication))
	for _, r := range v.Replication {
		reps[r.Shard] = r
	}
	rows := make([][]string, 0, len(v.Shards))
	for _, a := range v.Shards {
		owner, gen, state := a.NodeID, "-", "serving"
		if owner == "" {
			owner = "-"
		}
		if a.Generation > 0 {
			gen = fmt.Sprint(a.Generation)
		}
		if a.Unavailable != "" {
			state = a.Unavailable
		}
		end, durable, lag := positionColumns(a, reps[a.Shard])
		rows = append(rows, []string{fmt.Sprint(a.Shard), owner, followerList(a.Replicas), gen, state, end, durable, lag})
	}
	return p.Table([]string{"SHARD", "OWNER", "FOLLOWERS", "GENERATION", "STATE", "END", "DURABLE", "LAG"}, rows)
}

// positionColumns renders a shard's reported positions: the leader's end,
// then each follower's durable offset and lag, in a.Replicas order ("-"
// for what was not reported at the shard's generation).
func positionColumns(a wire.ShardAssignment, r wire.ShardReplication) (end, durable, lag string) {
	if len(a.Replicas) == 0 {
		return "-", "-", "-"
	}
	end = "-"
	if lp := r.LeaderPosition; lp != nil && r.Leader == a.NodeID && lp.Generation == a.Generation {
		end = fmt.Sprint(lp.End)
	}
	ds, ls := make([]string, len(a.Replicas)), make([]string, len(a.Replicas))
	for i, rep := range a.Replicas {
		ds[i], ls[i] = "-", "-"
		for _, c := range r.Replicas {
			if c.NodeID != rep.NodeID || c.Position == nil || c.Position.Generation != a.Generation {
				continue
			}
			ds[i] = fmt.Sprint(c.Position.Durable)
			if c.Lag != nil {
				ls[i] = fmt.Sprint(*c.Lag)
			}
		}
	}
	return end, strings.Join(ds, ","), strings.Join(ls, ",")
}

// followerList is the followers' node ids, comma-separated, or "-".
func followerList(rs []wire.ShardReplica) string {
	if len(rs) == 0 {
		return "-"
	}
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.NodeID
	}
	return strings.Join(ids, ",")
}

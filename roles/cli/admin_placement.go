package cli

import (
	"context"
	"fmt"
	"net/http"

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

func placementCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "placement",
		Usage:     "show which broker owns each shard of a stream or cache",
		UsageText: "felix admin placement show STREAM [-o json]\nfelix admin placement show --cache CACHE [-o json]",
		Description: "The control plane places every shard of every stream and cache on one broker, its owner,\n" +
			"at a generation that grows with each change of owner. Brokers do not act on it yet: every\n" +
			"broker still serves every shard. Examples:\n\n" +
			"   felix admin placement show events\n" +
			"   felix admin placement show --cache sessions -o json",
		Subcommands: []*cli.Command{placementShowCommand()},
	})
}

func placementShowCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "show",
		Usage:     "show each shard's owner, generation and state",
		ArgsUsage: "STREAM",
		UsageText: "felix admin placement show STREAM [-o json]\nfelix admin placement show --cache CACHE [-o json]",
		Description: "Lists every shard of STREAM (or of the cache named by --cache) in the tenant and namespace\n" +
			"of the settings: the owner's node id, the generation, and its state: serving, or why not\n" +
			"(not_assigned, owner_down, storage_lost). Needs cluster.manage, tenant.manage, or read\n" +
			"access to the stream or cache. Example:\n\n   felix admin placement show events",
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
				return printPlacement(p, v)
			})
		},
	})
}

func printPlacement(p printer, v wire.PlacementView) error {
	if v.Shards == nil {
		v.Shards = []wire.ShardAssignment{}
	}
	if p.json {
		return p.JSON(v)
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
		rows = append(rows, []string{fmt.Sprint(a.Shard), owner, gen, state})
	}
	return p.Table([]string{"SHARD", "OWNER", "GENERATION", "STATE"}, rows)
}

package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/wire"
)

// AbandonShard gives up the copies of a waiting durable shard that only
// down brokers hold, or with dryRun says what that would do
// (POST /v1/placement/streams/{tenant}/{namespace}/{stream}/shards/{shard}/abandon).
func (a *AdminClient) AbandonShard(ctx context.Context, tenant, ns, stream string, shard uint32, dryRun bool, keep ...string) (wire.PlacementAbandon, error) {
	q := url.Values{}
	if dryRun {
		q.Set("dry_run", "true")
	}
	if len(keep) > 0 {
		q.Set("keep", strings.Join(keep, ","))
	}
	var v wire.PlacementAbandon
	path := apiPath("placement", "streams", tenant, ns, stream, "shards", strconv.FormatUint(uint64(shard), 10), "abandon")
	err := a.do(ctx, http.MethodPost, path, q, nil, &v)
	return v, err
}

func placementAbandonCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "abandon",
		Usage:     "give up the copies of a waiting durable shard that only down brokers hold",
		ArgsUsage: "STREAM",
		UsageText: "felix admin placement abandon STREAM --shard N [--keep NODE,...] [--dry-run] [--yes] [-o json]",
		Description: "A durable shard whose owner is down waits for it rather than serve a short copy; so does\n" +
			"one whose followers came back under a new storage identity (after a crash under periodic or\n" +
			"none fsync) and so cannot be promoted. When the down brokers will not come back, abandon\n" +
			"places the shard on the live brokers of its replica set that keep a copy: one leads at a new\n" +
			"generation and takes the furthest of their copies before it serves, the others follow, and\n" +
			"the down brokers leave the set. A follower that came back under a new storage identity has\n" +
			"already left the set, though its disk may hold the log: name it with --keep (the brokers\n" +
			"named replace the live members of the set). Records no kept copy holds are lost; the command\n" +
			"says which brokers those are and asks first (on a terminal; otherwise --yes is required).\n" +
			"Refused for a shard that is served, and for one no live broker holds a copy of. Needs\n" +
			"cluster.manage. Examples:\n\n" +
			"   felix admin placement abandon orders --shard 3 --dry-run\n" +
			"   felix admin placement abandon orders --shard 3 --yes\n" +
			"   felix admin placement abandon orders --shard 3 --keep broker-2 --yes",
		Flags: clientFlags(
			&cli.UintFlag{Name: "shard", Usage: "the shard `N` to abandon (required)", Required: true},
			&cli.StringSliceFlag{Name: "keep", Usage: "the live brokers `NODE,...` whose copies to keep (default: the live members of the replica set)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would be done, change nothing"},
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "abandon without asking"},
		),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1); err != nil {
				return err
			}
			shard := c.Uint("shard")
			if shard >= 1<<16 {
				return usageErrorf(c, "--shard %d: shard numbers are below 65536", shard)
			}
			stream := c.Args().First()
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				plan, err := a.AbandonShard(c.Context, s.Tenant, s.Namespace, stream, uint32(shard), true, c.StringSlice("keep")...)
				if err != nil {
					return err
				}
				if c.Bool("dry-run") {
					if p.json {
						return p.JSON(plan)
					}
					return p.Line("%s\n(dry run: nothing was changed)", describeAbandon(stream, plan, true))
				}
				if !p.json {
					if err := p.Line("%s", describeAbandon(stream, plan, true)); err != nil {
						return err
					}
				}
				act := fmt.Sprintf("abandon shard %d of %s, losing what only %s held", shard, stream, strings.Join(plan.Lost, ", "))
				if len(plan.Lost) == 0 {
					act = fmt.Sprintf("abandon shard %d of %s", shard, stream)
				}
				if err := confirmTo(c, act); err != nil {
					return err
				}
				done, err := a.AbandonShard(c.Context, s.Tenant, s.Namespace, stream, uint32(shard), false, c.StringSlice("keep")...)
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(done)
				}
				return p.Line("%s", describeAbandon(stream, done, false))
			})
		},
	})
}

// describeAbandon says in a sentence or two what abandon does (plan) or
// did.
func describeAbandon(stream string, v wire.PlacementAbandon, plan bool) string {
	var b strings.Builder
	why := v.Before.Unavailable
	if why == "" {
		why = "not served"
	}
	fmt.Fprintf(&b, "shard %d of %s waits for %s (%s, generation %d).\n", v.Before.Shard, stream, v.Before.NodeID, why, v.Before.Generation)
	verb := "abandoned"
	if plan {
		verb = "abandoning it"
	}
	fmt.Fprintf(&b, "%s: %s leads at generation %d and takes the furthest of the copies on %s", verb, v.After.NodeID,
		v.After.Generation, strings.Join(v.Kept, ", "))
	if len(v.Lost) > 0 {
		fmt.Fprintf(&b, "; the copies on %s are given up, and records only they held are lost", strings.Join(v.Lost, ", "))
	}
	b.WriteString(".")
	return b.String()
}

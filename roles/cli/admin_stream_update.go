package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/wire"
)

// streamUpdateCommand is `felix admin stream update`.
func streamUpdateCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "update",
		Usage:     "change a stream's retention or subscriber queue policy",
		ArgsUsage: "NAME",
		UsageText: "felix admin stream update NAME [--retention-bytes N] [--retention-age 24h] [--policy drop_new|block|drop_old]",
		Description: "Changes what may change after a stream was created, in --tenant/--namespace. A bound not\n" +
			"given keeps its current value; 0 removes it (keep without limit). Brokers apply a new\n" +
			"retention on their next catalog sync and retention pass. Examples:\n\n" +
			"   felix admin stream update events --retention-bytes 1073741824\n" +
			"   felix admin stream update events --retention-age 168h --policy block\n" +
			"   felix admin stream update events --retention-age 0",
		Flags: clientFlags(
			&cli.Uint64Flag{Name: "retention-bytes", Usage: "keep at most `BYTES` per shard log (0: no limit)", DefaultText: "unchanged"},
			&cli.DurationFlag{Name: "retention-age", Usage: "keep records for `DURATION`, e.g. 24h (0: no limit)", DefaultText: "unchanged"},
			&cli.StringFlag{Name: "policy", Usage: "what a full subscriber queue does: drop_new, block or drop_old", DefaultText: "unchanged"},
		),
		Action: runStreamUpdate,
	})
}

func runStreamUpdate(c *cli.Context) error {
	if err := needArgs(c, 1, 1); err != nil {
		return err
	}
	if !c.IsSet("retention-bytes") && !c.IsSet("retention-age") && !c.IsSet("policy") {
		return usageErrorf(c, "nothing to change: give --retention-bytes, --retention-age or --policy")
	}
	if c.IsSet("retention-age") && c.Duration("retention-age") < 0 {
		return usageErrorf(c, "--retention-age must not be negative")
	}
	var patch StreamPatch
	if c.IsSet("policy") {
		policy := c.String("policy")
		switch policy {
		case "drop_new", "block", "drop_old":
		default:
			return usageErrorf(c, "--policy %q: want drop_new, block or drop_old", policy)
		}
		patch.SubQueuePolicy = &policy
	}
	name := c.Args().First()
	return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
		if c.IsSet("retention-bytes") || c.IsSet("retention-age") {
			cur, err := a.Stream(c.Context, s.Tenant, s.Namespace, name)
			if err != nil {
				return err
			}
			r := mergeRetention(c, cur.Retention)
			patch.Retention = &r
		}
		spec, err := a.UpdateStream(c.Context, s.Tenant, s.Namespace, name, patch)
		if err != nil {
			return err
		}
		if p.json {
			return p.JSON(spec)
		}
		policy := spec.SubQueuePolicy
		if policy == "" {
			policy = "default"
		}
		return p.Line("updated stream %s: retention %s, policy %s", inNamespace(s, name), retentionText(spec.Retention), policy)
	})
}

// mergeRetention applies the retention flags to the stream's current
// retention, since an update replaces the retention as a whole.
func mergeRetention(c *cli.Context, r wire.Retention) wire.Retention {
	if c.IsSet("retention-bytes") {
		r.MaxSizeBytes = nil
		if v := c.Uint64("retention-bytes"); v > 0 {
			r.MaxSizeBytes = &v
		}
	}
	if c.IsSet("retention-age") {
		r.MaxAgeSeconds = nil
		if d := c.Duration("retention-age"); d > 0 {
			v := uint64(ttlSeconds(d))
			r.MaxAgeSeconds = &v
		}
	}
	return r
}

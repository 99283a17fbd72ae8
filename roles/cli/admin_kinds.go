package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/wire"
)

func tenantKind() resourceKind[wire.Tenant] {
	return resourceKind[wire.Tenant]{
		name: "tenant", plural: "tenants",
		usage:         "manage tenants (needs a cluster admin token)",
		scope:         "of the cluster",
		header:        []string{"TENANT", "DISPLAY NAME"},
		row:           func(t wire.Tenant) []string { return []string{t.TenantID, t.DisplayName} },
		label:         func(_ Settings, name string) string { return name },
		recursive:     true,
		createFlags:   []cli.Flag{&cli.StringFlag{Name: "display-name", Usage: "human-readable `NAME`"}},
		createOptions: "[--display-name TEXT]",
		createExample: "felix admin tenant create acme --display-name 'Acme Corp'",
		create: func(c *cli.Context, a *AdminClient, _ Settings, name string) (wire.Tenant, error) {
			return a.CreateTenant(c.Context, wire.Tenant{TenantID: name, DisplayName: c.String("display-name")})
		},
		list: func(ctx context.Context, a *AdminClient, _ Settings) ([]wire.Tenant, error) { return a.Tenants(ctx) },
		get: func(ctx context.Context, a *AdminClient, _ Settings, name string) (wire.Tenant, error) {
			return a.Tenant(ctx, name)
		},
		del: func(ctx context.Context, a *AdminClient, _ Settings, name string, r bool) error {
			return a.DeleteTenant(ctx, name, r)
		},
	}
}

func namespaceKind() resourceKind[wire.Namespace] {
	return resourceKind[wire.Namespace]{
		name: "namespace", plural: "namespaces",
		usage:         "manage the namespaces of a tenant",
		scope:         "in --tenant",
		header:        []string{"TENANT", "NAMESPACE"},
		row:           func(n wire.Namespace) []string { return []string{n.TenantID, n.Namespace} },
		label:         func(s Settings, name string) string { return s.Tenant + "/" + name },
		recursive:     true,
		createExample: "felix admin namespace create prod --tenant acme",
		create: func(c *cli.Context, a *AdminClient, s Settings, name string) (wire.Namespace, error) {
			return a.CreateNamespace(c.Context, s.Tenant, name)
		},
		list: func(ctx context.Context, a *AdminClient, s Settings) ([]wire.Namespace, error) {
			return a.Namespaces(ctx, s.Tenant)
		},
		get: func(ctx context.Context, a *AdminClient, s Settings, name string) (wire.Namespace, error) {
			return a.Namespace(ctx, s.Tenant, name)
		},
		del: func(ctx context.Context, a *AdminClient, s Settings, name string, r bool) error {
			return a.DeleteNamespace(ctx, s.Tenant, name, r)
		},
	}
}

func inNamespace(s Settings, name string) string { return s.Tenant + "/" + s.Namespace + "/" + name }

func streamKind() resourceKind[wire.StreamSpec] {
	return resourceKind[wire.StreamSpec]{
		name: "stream", plural: "streams",
		usage:  "manage the streams of a namespace",
		scope:  "in --tenant/--namespace",
		header: []string{"STREAM", "SHARDS", "DURABLE", "CONSISTENCY", "REPLICAS", "POLICY", "RETENTION"},
		row:    streamRow,
		label:  inNamespace,
		createFlags: []cli.Flag{
			&cli.UintFlag{Name: "shards", Usage: "number of shards", DefaultText: "1"},
			&cli.BoolFlag{Name: "durable", Usage: "write the stream to each shard's segment log, so subscribers can start from an offset, resume and read ranges"},
			&cli.Uint64Flag{Name: "retention-bytes", Usage: "keep at most `BYTES` per shard log of a durable stream (oldest segments go first)", DefaultText: "no limit"},
			&cli.DurationFlag{Name: "retention-age", Usage: "keep records of a durable stream for `DURATION`, e.g. 24h", DefaultText: "no limit"},
			&cli.StringFlag{Name: "policy", Usage: "what a full subscriber queue does: drop_new, block or drop_old", DefaultText: "broker default"},
			&cli.StringFlag{Name: "consistency", Usage: "what an ack waits for: leader or quorum", DefaultText: "leader"},
			&cli.UintFlag{Name: "replication-factor", Usage: "copies of each shard, the leader's included (durable streams get the others as followers)", DefaultText: "the control plane's FELIX_DEFAULT_REPLICATION_FACTOR, 1 unless set"},
		},
		createOptions: "[--shards N] [--durable] [--retention-bytes N] [--retention-age 24h] [--policy drop_new|block|drop_old] " +
			"[--consistency leader|quorum] [--replication-factor N]",
		createExample: "felix admin stream create events --shards 4 --durable --retention-age 24h",
		create:        createStream,
		list: func(ctx context.Context, a *AdminClient, s Settings) ([]wire.StreamSpec, error) {
			return a.Streams(ctx, s.Tenant, s.Namespace)
		},
		get: func(ctx context.Context, a *AdminClient, s Settings, name string) (wire.StreamSpec, error) {
			return a.Stream(ctx, s.Tenant, s.Namespace, name)
		},
		del: func(ctx context.Context, a *AdminClient, s Settings, name string, _ bool) error {
			return a.DeleteStream(ctx, s.Tenant, s.Namespace, name)
		},
		more: []*cli.Command{streamUpdateCommand(), streamInfoCommand()},
	}
}

// streamSpec builds the spec of a stream create command from its flags.
func streamSpec(c *cli.Context, s Settings, name string) (wire.StreamSpec, error) {
	spec := wire.StreamSpec{
		TenantID: s.Tenant, Namespace: s.Namespace, Stream: name,
		Shards:            uint32(c.Uint("shards")),
		Durable:           c.Bool("durable"),
		Consistency:       c.String("consistency"),
		ReplicationFactor: uint32(c.Uint("replication-factor")),
		SubQueuePolicy:    c.String("policy"),
	}
	switch spec.SubQueuePolicy {
	case "", "drop_new", "block", "drop_old":
	default:
		return spec, usageErrorf(c, "--policy %q: want drop_new, block or drop_old", spec.SubQueuePolicy)
	}
	switch spec.Consistency {
	case "", "leader", "quorum":
	default:
		return spec, usageErrorf(c, "--consistency %q: want leader or quorum", spec.Consistency)
	}
	if c.Uint("shards") > 1<<20 || c.Uint("replication-factor") > 1<<20 {
		return spec, usageErrorf(c, "--shards and --replication-factor must be small numbers")
	}
	if c.IsSet("retention-bytes") {
		v := c.Uint64("retention-bytes")
		spec.Retention.MaxSizeBytes = &v
	}
	if c.IsSet("retention-age") {
		d := c.Duration("retention-age")
		if d <= 0 {
			return spec, usageErrorf(c, "--retention-age must be positive")
		}
		v := uint64(ttlSeconds(d))
		spec.Retention.MaxAgeSeconds = &v
	}
	return spec, nil
}

func createStream(c *cli.Context, a *AdminClient, s Settings, name string) (wire.StreamSpec, error) {
	spec, err := streamSpec(c, s, name)
	if err != nil {
		return spec, err
	}
	return a.createStream(c.Context, spec, c.IsSet("shards"))
}

func streamRow(s wire.StreamSpec) []string {
	policy := s.SubQueuePolicy
	if policy == "" {
		policy = "default"
	}
	return []string{s.Stream, strconv.FormatUint(uint64(s.Shards), 10), strconv.FormatBool(s.Durable),
		orDash(s.Consistency), strconv.FormatUint(uint64(s.ReplicationFactor), 10), policy, retentionText(s.Retention)}
}

func retentionText(r wire.Retention) string {
	var out string
	if r.MaxSizeBytes != nil {
		out = fmt.Sprintf("%d bytes", *r.MaxSizeBytes)
	}
	if r.MaxAgeSeconds != nil {
		if out != "" {
			out += ", "
		}
		out += (time.Duration(*r.MaxAgeSeconds) * time.Second).String()
	}
	return orDash(out)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cacheKind() resourceKind[wire.CacheSpec] {
	return resourceKind[wire.CacheSpec]{
		name: "cache", plural: "caches",
		usage:  "manage the caches of a namespace",
		scope:  "in --tenant/--namespace",
		header: []string{"CACHE", "SHARDS", "MAX ENTRIES", "MAX BYTES"},
		row: func(c wire.CacheSpec) []string {
			return []string{c.Cache, orDefault(uint64(c.Shards)), orDefault(c.MaxEntries), orDefault(c.MaxBytes)}
		},
		label: inNamespace,
		createFlags: []cli.Flag{
			&cli.UintFlag{Name: "shards", Usage: "number of shards; in a cluster each is placed on a broker", DefaultText: "1"},
			&cli.Uint64Flag{Name: "max-entries", Usage: "hold at most `N` keys", DefaultText: "broker default"},
			&cli.Uint64Flag{Name: "max-bytes", Usage: "hold at most `BYTES` of keys and values", DefaultText: "broker default"},
		},
		createOptions: "[--shards N] [--max-entries N] [--max-bytes N]",
		createExample: "felix admin cache create sessions --shards 3 --max-entries 100000",
		create:        createCache,
		list: func(ctx context.Context, a *AdminClient, s Settings) ([]wire.CacheSpec, error) {
			return a.Caches(ctx, s.Tenant, s.Namespace)
		},
		get: func(ctx context.Context, a *AdminClient, s Settings, name string) (wire.CacheSpec, error) {
			return a.Cache(ctx, s.Tenant, s.Namespace, name)
		},
		del: func(ctx context.Context, a *AdminClient, s Settings, name string, _ bool) error {
			return a.DeleteCache(ctx, s.Tenant, s.Namespace, name)
		},
	}
}

// createCache creates a cache from a cache create command's flags.
// --shards 0 is refused here: the spec's shard count omits 0, which would
// mean the default.
func createCache(c *cli.Context, a *AdminClient, s Settings, name string) (wire.CacheSpec, error) {
	spec := wire.CacheSpec{TenantID: s.Tenant, Namespace: s.Namespace, Cache: name,
		MaxEntries: c.Uint64("max-entries"), MaxBytes: c.Uint64("max-bytes")}
	if c.IsSet("shards") {
		n := c.Uint("shards")
		if n == 0 || n > 1<<20 {
			return spec, usageErrorf(c, "--shards %d: want a number from 1 to %d", n, 1<<20)
		}
		spec.Shards = uint32(n)
	}
	return a.CreateCache(c.Context, spec)
}

func orDefault(v uint64) string {
	if v == 0 {
		return "default"
	}
	return strconv.FormatUint(v, 10)
}

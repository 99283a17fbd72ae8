package bench

import (
	"context"

	"github.com/urfave/cli/v2"
)

// cacheCommand is `felix bench cache`: a get/put mix, acked puts, one put
// at a time, or compare-and-set under contention, chosen by --mode.
func cacheCommand(withClient func(...cli.Flag) []cli.Flag, dur cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "cache",
		Usage: "cache requests: a get/put mix, acked puts, one put at a time, or compare-and-set on one key (--mode)",
		Description: "Creates a cache, runs --mode for --duration, deletes the cache and prints its figures:\n\n" +
			"   mix      (the default) --inflight callers, each with one request outstanding, half gets and\n" +
			"            half puts (1 min TTL) on random keys of --keys: ops_per_s, gets_per_s, puts_per_s.\n" +
			"   put      --inflight callers, each with one acknowledged put outstanding (no TTL) on random\n" +
			"            keys of --keys: puts_per_s, put_mb_per_s and put_p50/p99/p999 under that load;\n" +
			"            only acknowledged puts count.\n" +
			"   latency  one acknowledged put at a time, the keys taken in turn: put_p50/p99/p999 and\n" +
			"            puts_per_s; the first failed put ends the run.\n" +
			"   cas      --callers callers in a read-modify-write loop on ONE key: read it with its version\n" +
			"            (CacheGetVersioned), add one to the counter in the value's first 8 bytes, write it\n" +
			"            back if the version is unchanged (CachePutIf, IfVersion), read again when refused.\n" +
			"            applied_per_s counts updates applied, refused_per_s writes refused,\n" +
			"            writes_per_update the conditional writes each applied update took, and\n" +
			"            update_p50/p99/p999 the time from an update's first read to its applied write\n" +
			"            (retries included). The final counter must equal the updates applied (plus at\n" +
			"            most the calls whose answer was lost, reported as unconfirmed), or the run fails.\n" +
			"            Needs a broker with FEATURE_CACHE_CONDITIONAL.\n\n" +
			"Whether the cache lives in memory or in a log, and its fsync policy, are the broker's (a broker\n" +
			"with durable storage and FELIX_DURABLE_FSYNC); the control plane has no per-cache setting, so\n" +
			"this command has no --durable or --fsync. Examples:\n\n" +
			"   felix bench cache --mode put --inflight 256 --value 256 --duration 10s -o json\n" +
			"   felix bench cache --mode latency --duration 10s\n" +
			"   felix bench cache --mode cas --callers 16 --duration 10s",
		Flags: withClient(dur,
			&cli.StringFlag{Name: "mode", Value: cacheModeMix, Usage: "mix, put, latency or cas (see the description)"},
			&cli.IntFlag{Name: "inflight", Value: 32, Usage: "mix and put: callers, each with one request outstanding"},
			&cli.IntFlag{Name: "callers", Value: 16, Usage: "cas: callers updating the one key"},
			&cli.IntFlag{Name: "value", Value: 256, Usage: "value size in bytes (cas: at least 8)"},
			&cli.IntFlag{Name: "keys", Value: 10000, Usage: "mix, put and latency: distinct keys"}),
		Action: func(c *cli.Context) error {
			return run(c, func(ctx context.Context, t *target) (*result, error) {
				return runCacheMode(ctx, t, cacheParams{mode: c.String("mode"), inflight: max(1, c.Int("inflight")),
					callers: max(1, c.Int("callers")), value: max(0, c.Int("value")), keys: max(1, c.Int("keys")),
					duration: bounded(c.Duration("duration"))})
			})
		},
	}
}

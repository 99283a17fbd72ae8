package bench

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"
)

func inflightFlag(def int) cli.Flag {
	return &cli.IntFlag{Name: "inflight", Value: def, Usage: "with --acked, this many callers each keep one acked batch outstanding"}
}

func durableFlag() cli.Flag {
	return &cli.BoolFlag{Name: "durable", Usage: "create the bench stream durable (the broker's FELIX_DURABLE_FSYNC decides when it syncs)"}
}

// durableCommand is `felix bench durable`: the pubsub and latency scenarios
// against a durable stream, chosen by --mode.
func durableCommand(withClient func(...cli.Flag) []cli.Flag, dur, policy cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "durable",
		Usage: "publish to a durable stream: fire-and-forget, acked or idempotent (MB/s, msgs/s) or one acked publish at a time (p50/p99)",
		Flags: withClient(append([]cli.Flag{dur, policy,
			&cli.IntFlag{Name: "payload", Value: 4096, Usage: "payload size in bytes"},
			&cli.StringFlag{Name: "mode", Value: "acked", Usage: "fire-and-forget, acked, idempotent (acked through idempotent producers, --inflight batches in flight over as many producers as that takes at 64 each) or one-at-a-time"},
			&cli.IntFlag{Name: "batch", Usage: "payloads per publish batch (default 64 fire-and-forget, 1 acked)"},
			inflightFlag(256)}, append(routingFlags(), replicationFlags()...)...)...),
		Action: func(c *cli.Context) error {
			return run(c, func(ctx context.Context, t *target) (*result, error) {
				return runDurable(ctx, t, c.String("mode"), pubsubParams{payload: c.Int("payload"), batch: c.Int("batch"),
					inflight: c.Int("inflight"), durable: true, duration: bounded(c.Duration("duration")), policy: c.String("policy")})
			})
		},
	}
}

func runDurable(ctx context.Context, t *target, mode string, p pubsubParams) (*result, error) {
	var r *result
	var err error
	switch mode {
	case "fire-and-forget":
		p.batch = cmpOr(p.batch, 64)
		r, err = runPubSub(ctx, t, p)
	case "acked":
		p.acked, p.batch = true, cmpOr(p.batch, 1)
		r, err = runPubSub(ctx, t, p)
	case "idempotent":
		p.acked, p.idempotent, p.batch = true, true, cmpOr(p.batch, 1)
		r, err = runPubSub(ctx, t, p)
	case "one-at-a-time":
		r, err = runLatency(ctx, t, p.payload, 1<<30, p.duration, true)
		if err == nil {
			r.Params["duration"] = p.duration.String()
		}
	default:
		return nil, fmt.Errorf("unknown --mode %q: want fire-and-forget, acked, idempotent or one-at-a-time", mode)
	}
	if err != nil {
		return nil, err
	}
	r.Scenario = "durable"
	r.Params["mode"] = mode
	t.repl.addParams(r.Params)
	return r, nil
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

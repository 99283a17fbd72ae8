package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// commitClient is the part of *felix.Client and *felix.ClusterClient the
// commit and state commands use.
type commitClient interface {
	Commit(ctx context.Context, namespace string, entityKey []byte, ops []felix.CommitOp) (uint64, error)
	CommitIf(ctx context.Context, namespace string, entityKey []byte, ops []felix.CommitOp, expected uint64) (uint64, error)
	CommitOnShard(ctx context.Context, namespace string, shard uint32, ops []felix.CommitOp) (uint64, error)
	CommitIfOnShard(ctx context.Context, namespace string, shard uint32, ops []felix.CommitOp, expected uint64) (uint64, error)
	StateGet(ctx context.Context, namespace, stream string, entityKey []byte, key string) ([]byte, uint64, bool, error)
	StateGetOnShard(ctx context.Context, namespace, stream string, shard uint32, key string) ([]byte, uint64, bool, error)
}

// commitsOf returns the commit calls of a connected client.
func commitsOf(bc brokerClient) (commitClient, error) {
	return sdkAs[commitClient](bc, "make atomic commits")
}

// commitTarget is where a commit or state read goes: the shard an
// entity key routes to, or, with --shard, that shard.
type commitTarget struct {
	stream    string
	entityKey []byte
	shard     uint32
	onShard   bool
}

// commitTargetOf reads STREAM [ENTITY_KEY] and --shard from the first
// arguments; rest is how many arguments follow them.
func commitTargetOf(c *cli.Context, rest int) (commitTarget, error) {
	t := commitTarget{stream: c.Args().First()}
	if c.IsSet("shard") {
		if err := needArgs(c, 1+rest, 1+rest); err != nil {
			return t, usageErrorf(c, "with --shard leave out ENTITY_KEY: %v", err)
		}
		shard, err := shardFlag(c)
		t.shard, t.onShard = shard, true
		return t, err
	}
	if err := needArgs(c, 2+rest, 2+rest); err != nil {
		return t, err
	}
	t.entityKey = []byte(c.Args().Get(1))
	return t, nil
}

func commitCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "commit",
		Usage:     "write one event and state changes of one stream shard atomically",
		ArgsUsage: "STREAM ENTITY_KEY (or STREAM --shard N)",
		UsageText: "felix commit STREAM ENTITY_KEY --event PAYLOAD [--enqueue] [--put KEY=VALUE ...] [--delete KEY ...] [--if-offset N] [-o json]\n" +
			"felix commit STREAM --shard N --event PAYLOAD [...]",
		Description: "Writes one record to the shard of the durable STREAM that ENTITY_KEY routes to (or shard\n" +
			"--shard N): the event PAYLOAD, published (or, with --enqueue, enqueued), and the state changes\n" +
			"of that shard, each --put KEY=VALUE and each --delete KEY (puts first, then deletes, in the\n" +
			"order given). All of it is written or none; no reader sees part of it (docs/atomic-commit.md).\n" +
			"Written, it prints the record's offset, which is the version of every key it put (felix state\n" +
			"get prints it); -o json: {\"stream\",\"written\":true,\"offset\"}.\n\n" +
			"With --if-offset N the record is written only if it would land at offset N, the shard's next\n" +
			"offset. Refused, nothing is written: it prints \"refused\" with the shard's current next offset\n" +
			"(the tail) on standard error and exits with code 3 (-o json: {\"stream\",\"written\":false,\n" +
			"\"expected\",\"tail\"}). A commit whose answer was lost is never sent again: the error says the\n" +
			"outcome is unknown; read the stream or the state to find out.\n\n" +
			"Examples:\n\n" +
			"   felix commit orders order-17 --event placed --put status=placed --put total=42\n" +
			"   felix commit orders order-17 --event shipped --put status=shipped --delete total --if-offset 8",
		Flags: clientFlags(
			&cli.StringFlag{Name: "event", Usage: "the event's payload `PAYLOAD` (required: a commit holds exactly one event)"},
			&cli.BoolFlag{Name: "enqueue", Usage: "enqueue the event rather than publish it"},
			&cli.GenericFlag{Name: "put", Usage: "set state `KEY=VALUE` (repeatable; VALUE taken whole, commas too)", Value: &repeated{}},
			&cli.GenericFlag{Name: "delete", Usage: "delete state `KEY` (repeatable)", Value: &repeated{}},
			&cli.UintFlag{Name: "shard", Usage: "commit to shard `N` (leave out ENTITY_KEY)"},
			&cli.Uint64Flag{Name: flagIfOffset, Usage: "write only if the record lands at the shard's next offset `N`", DefaultText: "unconditional"},
		),
		Action: func(c *cli.Context) error { return runCommit(c, tk) },
	})
}

func runCommit(c *cli.Context, tk toolkit) error {
	if err := needArgs(c, 1, 2); err != nil {
		return err
	}
	t, err := commitTargetOf(c, 0)
	if err != nil {
		return err
	}
	ops, err := commitOps(c, t.stream)
	if err != nil {
		return err
	}
	return runBroker(c, tk, false, func(ctx context.Context, bc brokerClient, s Settings, out printer) error {
		cc, err := commitsOf(bc)
		if err != nil {
			return err
		}
		off, err := sendCommit(ctx, c, cc, s.Namespace, t, ops)
		var om *felix.OffsetMismatchError
		if errors.As(err, &om) {
			if out.json {
				if err := out.JSON(map[string]any{"stream": t.stream, "written": false, "expected": om.Expected, "tail": om.Tail}); err != nil {
					return err
				}
			}
			return cli.Exit(fmt.Sprintf("refused: the shard of stream %s is at offset %d, not %d; nothing was written", t.stream, om.Tail, om.Expected), exitConditionRefused)
		}
		if err != nil {
			return withHint(err, string(wire.CodeInvalidRequest),
				"a commit needs a durable stream; create one with felix admin stream create NAME --durable")
		}
		if out.json {
			return out.JSON(map[string]any{"stream": t.stream, "written": true, "offset": off})
		}
		return out.Line("offset %d", off)
	})
}

// commitOps builds the commit's ops from --event, --enqueue, --put and
// --delete.
func commitOps(c *cli.Context, stream string) ([]felix.CommitOp, error) {
	if !c.IsSet("event") {
		return nil, usageErrorf(c, "--event PAYLOAD is required: a commit holds exactly one event")
	}
	ev := felix.CommitPublish(stream, []byte(c.String("event")))
	if c.Bool("enqueue") {
		ev = felix.CommitEnqueue(stream, []byte(c.String("event")))
	}
	ops := []felix.CommitOp{ev}
	for _, kv := range repeatedOf(c, "put") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf(c, "--put %q: expected KEY=VALUE", kv)
		}
		ops = append(ops, felix.CommitPut(stream, k, []byte(v)))
	}
	for _, k := range repeatedOf(c, "delete") {
		if k == "" {
			return nil, usageErrorf(c, "--delete needs a KEY")
		}
		ops = append(ops, felix.CommitDelete(stream, k))
	}
	return ops, nil
}

func sendCommit(ctx context.Context, c *cli.Context, cc commitClient, ns string, t commitTarget, ops []felix.CommitOp) (uint64, error) {
	cond, expected := c.IsSet(flagIfOffset), c.Uint64(flagIfOffset)
	switch {
	case t.onShard && cond:
		return cc.CommitIfOnShard(ctx, ns, t.shard, ops, expected)
	case t.onShard:
		return cc.CommitOnShard(ctx, ns, t.shard, ops)
	case cond:
		return cc.CommitIf(ctx, ns, t.entityKey, ops, expected)
	}
	return cc.Commit(ctx, ns, t.entityKey, ops)
}

// repeated is a flag given once per value, each taken whole: unlike a
// StringSliceFlag it does not split on commas, so a VALUE may hold them.
type repeated struct{ vals []string }

func (r *repeated) Set(v string) error { r.vals = append(r.vals, v); return nil }
func (r *repeated) String() string {
	if r == nil {
		return ""
	}
	return strings.Join(r.vals, " ")
}

// repeatedOf returns the values of the repeated flag name.
func repeatedOf(c *cli.Context, name string) []string {
	if r, ok := c.Generic(name).(*repeated); ok && r != nil {
		return r.vals
	}
	return nil
}

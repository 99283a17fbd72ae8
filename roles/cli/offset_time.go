package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
)

func offsetForTimeCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "offset-for-time",
		Usage:     "find the first offset of a durable stream appended at or after a time",
		ArgsUsage: "STREAM",
		UsageText: "felix offset-for-time STREAM --at RFC3339|UNIX_MICROS [--shard N] [-o json]",
		Description: "Prints the offset of the first record of one shard of a durable STREAM that the broker\n" +
			"appended at or after --at (the oldest record kept when --at is older than all of them), ready\n" +
			"for felix sub --from or felix read --from. --at is an RFC 3339 time or microseconds since the\n" +
			"Unix epoch. When nothing that recent is committed yet it prints \"none\" on standard error and\n" +
			"exits 1 (with -o json: {\"found\": false}, exit 0). Examples:\n\n" +
			"   felix offset-for-time events --at 2026-11-29T08:00:00Z\n" +
			"   felix sub events --from $(felix offset-for-time events --at 1767225600000000)",
		Flags: clientFlags(
			&cli.StringFlag{Name: "at", Usage: "the `TIME`: RFC 3339 or microseconds since the epoch"},
			&cli.UintFlag{Name: "shard", Usage: "shard `N` of the stream", DefaultText: "0"},
		),
		Action: func(c *cli.Context) error { return runOffsetForTime(c, tk) },
	})
}

// parseAt reads --at: RFC 3339 (with or without fractional seconds) or
// integer microseconds since the epoch.
func parseAt(s string) (time.Time, error) {
	if us, err := strconv.ParseUint(s, 10, 63); err == nil {
		return time.UnixMicro(int64(us)), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time (2026-11-29T08:00:00Z) or microseconds since the epoch")
	}
	return t, nil
}

func runOffsetForTime(c *cli.Context, tk toolkit) error {
	if err := needArgs(c, 1, 1); err != nil {
		return err
	}
	if !c.IsSet("at") {
		return usageErrorf(c, "--at is required")
	}
	at, err := parseAt(c.String("at"))
	if err != nil {
		return usageErrorf(c, "--at %q: %v", c.String("at"), err)
	}
	shard, err := shardFlag(c)
	if err != nil {
		return err
	}
	return runBroker(c, tk, false, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		off, ok, err := bc.OffsetForTime(ctx, s.Namespace, c.Args().First(), shard, at)
		if err != nil {
			return err
		}
		at := at.UTC().Format(time.RFC3339Nano)
		switch {
		case p.json && ok:
			return p.JSON(map[string]any{"found": true, "offset": off, "at": at})
		case p.json:
			return p.JSON(map[string]any{"found": false, "at": at})
		case ok:
			return p.Line("%d", off)
		}
		return cli.Exit("none: nothing committed at or after "+at+" yet", exitGeneric)
	})
}

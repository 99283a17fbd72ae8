package cli

import (
	"bufio"
	"context"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

func subCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "sub",
		Usage:     "subscribe to a stream and print its messages",
		ArgsUsage: "STREAM",
		UsageText: "felix sub STREAM [--from earliest|latest|OFFSET] [--count N] [--shard N] [-o json]",
		Description: "Prints each message of one shard of STREAM (--shard, default 0, where messages published\n" +
			"without a key go) on its own line (with -o json, one JSON object\n" +
			"per line: {\"payload\": ..., \"offset\": n} where the broker sends offsets; a payload that is\n" +
			"not UTF-8 is given as payload_base64). Runs until --count messages have arrived or Ctrl-C.\n" +
			"Examples:\n\n" +
			"   felix sub events\n" +
			"   felix sub events --from earliest --count 10 -o json",
		Flags: clientFlags(
			&cli.StringFlag{Name: "from", Value: "latest", Usage: "where to start: earliest, latest or an offset"},
			&cli.UintFlag{Name: "count", Usage: "exit after `N` messages", DefaultText: "run until interrupted"},
			&cli.UintFlag{Name: "shard", Usage: "shard `N` of the stream to read", DefaultText: "0"},
		),
		Action: func(c *cli.Context) error { return runSub(c, tk) },
	})
}

// parseStart reads --from.
func parseStart(s string) (wire.StartPosition, bool) {
	switch s {
	case "", "latest":
		return wire.StartPosition{Kind: wire.StartLatest}, true
	case "earliest":
		return wire.StartPosition{Kind: wire.StartEarliest}, true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return wire.StartPosition{}, false
	}
	return wire.StartPosition{Kind: wire.StartOffset, Offset: n}, true
}

func runSub(c *cli.Context, tk toolkit) error {
	if err := needArgs(c, 1, 1); err != nil {
		return err
	}
	start, ok := parseStart(c.String("from"))
	if !ok {
		return usageErrorf(c, "--from %q: want earliest, latest or an offset", c.String("from"))
	}
	shard := c.Uint("shard")
	if uint64(shard) > uint64(^uint32(0)) {
		return usageErrorf(c, "--shard %d is out of range", shard)
	}
	p, err := newPrinter(c)
	if err != nil {
		return err
	}
	s, err := LoadClientSettings(c)
	if err != nil {
		return exitError(err)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := felix.SubscribeOptions{Start: start, Shard: uint32(shard)}
	return withBroker(ctx, tk, s, func(bc brokerClient) error {
		sub, err := bc.SubscribeFrom(ctx, s.Namespace, c.Args().First(), opts)
		if err != nil {
			return err
		}
		defer sub.Close()
		return printEvents(ctx, sub, p, uint64(c.Uint("count")))
	})
}

// printEvents prints events until count of them (0: no limit) have been
// printed or ctx ends, which is a clean exit.
func printEvents(ctx context.Context, sub eventSource, p printer, count uint64) error {
	w := bufio.NewWriter(p.w)
	defer w.Flush()
	p.w = w
	for n := uint64(0); count == 0 || n < count; n++ {
		ev, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil { // interrupted: a clean end
				return nil
			}
			return err
		}
		if err := printEvent(p, ev); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func printEvent(p printer, ev felix.Event) error {
	if !p.json {
		if _, err := p.w.Write(ev.Payload); err != nil {
			return err
		}
		_, err := p.w.Write([]byte{'\n'})
		return err
	}
	m := map[string]any{}
	bytesField(m, "payload", ev.Payload)
	if ev.HasOffset {
		m["offset"] = ev.Offset
	}
	return p.JSON(m)
}

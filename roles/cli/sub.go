package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

func subCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "sub",
		Usage:     "subscribe to a stream and print its messages",
		ArgsUsage: "STREAM",
		UsageText: "felix sub STREAM [--from earliest|latest|OFFSET] [--count N] [--shard N] [--positions] [-o json]",
		Description: "Prints each message of STREAM on its own line, from every shard of the stream merged in\n" +
			"the order they arrive (--shard N reads shard N alone). --positions starts each line with\n" +
			"the message's shard and, on a durable stream, offset (\"shard=2 offset=17 \"). With -o json\n" +
			"each line is one JSON object: {\"shard\": ..., \"payload\": ...} plus, on a durable stream,\n" +
			"\"offset\", \"time\" (when the broker appended it), \"publisher\" and \"skipped_before\" when the\n" +
			"broker reports them; a payload that is not UTF-8 is given as payload_base64.\n\n" +
			"Once every shard is subscribed, sub says so on standard error (\"subscribed to events\n" +
			"(shards 0-3) from latest\"): a script may publish from then on without losing a message.\n\n" +
			"--from picks the start on a durable stream: earliest (the oldest record kept), latest (only\n" +
			"new ones, the default) or an offset, which is the first offset printed: to resume after a\n" +
			"checkpoint C (the last offset a consumer handled), use --from C+1. Offsets are per shard, so\n" +
			"--from OFFSET needs --shard on a stream of several shards. A start the stream no longer\n" +
			"holds (or not yet) fails with the nearest offset that would work.\n\n" +
			"On a durable stream sub does not lose its place: when the broker ends a subscription that\n" +
			"fell behind, or shuts down, or the connection is lost (a restart), sub subscribes again\n" +
			"right after the last message printed on each shard (reconnecting with back-off, up to 10\n" +
			"attempts in a row), so nothing is skipped or repeated. Runs until --count messages have arrived or Ctrl-C.\n" +
			"Examples:\n\n" +
			"   felix sub events\n" +
			"   felix sub events --from earliest --count 10 -o json\n" +
			"   felix sub events --shard 3 --from 1201 --positions",
		Flags: clientFlags(
			&cli.StringFlag{Name: "from", Value: "latest", Usage: "where to start: earliest, latest or the first `OFFSET` to print (durable streams)"},
			&cli.UintFlag{Name: "count", Usage: "exit after `N` messages", DefaultText: "run until interrupted"},
			&cli.UintFlag{Name: "shard", Usage: "read shard `N` alone", DefaultText: "every shard"},
			&cli.BoolFlag{Name: "positions", Usage: "start each line with its shard and offset"},
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
	r := &subRun{stream: c.Args().First(), start: start, count: uint64(c.Uint("count")),
		positions: c.Bool("positions"), errw: c.App.ErrWriter}
	if c.IsSet("shard") {
		shard := c.Uint("shard")
		if uint64(shard) > uint64(^uint32(0)) {
			return usageErrorf(c, "--shard %d is out of range", shard)
		}
		r.shards = []uint32{uint32(shard)}
	}
	return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		r.ns, r.p = s.Namespace, p
		r.redial = func(ctx context.Context) (brokerClient, error) { return tk.connect(ctx, s) }
		err := r.run(ctx, bc)
		if errors.Is(err, errFromNeedsShard) {
			return usageErrorf(c, "%v", err)
		}
		return cursorHint(err)
	})
}

// printEvent prints one event of shard as a line.
func (r *subRun) printEvent(w io.Writer, shard uint32, ev felix.Event) error {
	p := printer{w: w, json: r.p.json}
	if p.json {
		m := recordJSON(ev.Payload, ev.Offset, ev.HasOffset, ev.Timestamp, ev.Publisher)
		m["shard"] = shard
		if ev.SkippedBefore != 0 {
			m["skipped_before"] = ev.SkippedBefore
		}
		return p.JSON(m)
	}
	if r.positions {
		if ev.HasOffset {
			fmt.Fprintf(w, "shard=%d offset=%d ", shard, ev.Offset)
		} else {
			fmt.Fprintf(w, "shard=%d ", shard)
		}
	}
	return printPayload(p, ev.Payload)
}

// printPayload writes a payload as one line of text.
func printPayload(p printer, payload []byte) error {
	if _, err := p.w.Write(payload); err != nil {
		return err
	}
	_, err := p.w.Write([]byte{'\n'})
	return err
}

// recordJSON is the JSON shape of an event or record: payload (or
// payload_base64), and offset, time (RFC 3339, UTC) and publisher when
// known.
func recordJSON(payload []byte, offset uint64, hasOffset bool, ts time.Time, publisher string) map[string]any {
	m := map[string]any{}
	bytesField(m, "payload", payload)
	if hasOffset {
		m["offset"] = offset
	}
	if !ts.IsZero() {
		m["time"] = ts.UTC().Format(time.RFC3339Nano)
	}
	if publisher != "" {
		m["publisher"] = publisher
	}
	return m
}

// cursorHint gives a *felix.SubscribeCursorError a hint naming the
// nearest offset that would work.
func cursorHint(err error) error {
	var ce *felix.SubscribeCursorError
	if !errors.As(err, &ce) {
		return err
	}
	return &hintedError{err: err, code: string(ce.Reason),
		hint: fmt.Sprintf("the nearest offset available is %d; start there with --from %d", ce.Available, ce.Available)}
}

package cli

import (
	"bufio"
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
		UsageText: "felix sub STREAM [--from earliest|latest|OFFSET] [--count N] [--shard N] [-o json]",
		Description: "Prints each message of one shard of STREAM (--shard, default 0, where messages published\n" +
			"without a key go) on its own line. With -o json each line is one JSON object:\n" +
			"{\"payload\": ...} plus, on a durable stream, \"offset\", \"time\" (when the broker appended it),\n" +
			"\"publisher\" and \"skipped_before\" when the broker reports them; a payload that is not UTF-8\n" +
			"is given as payload_base64. --from picks the start on a durable stream: earliest (the oldest\n" +
			"record kept), latest (only new ones, the default) or an offset; where it joined is printed\n" +
			"on standard error. A start the stream no longer holds (or not yet) fails with the nearest\n" +
			"offset that would work. When a durable subscription falls behind and the broker ends it, sub\n" +
			"subscribes again after the last message printed, so nothing is skipped or repeated. Runs\n" +
			"until --count messages have arrived or Ctrl-C.\n" +
			"Examples:\n\n" +
			"   felix sub events\n" +
			"   felix sub events --from earliest --count 10 -o json\n" +
			"   felix sub events --from 1200 --shard 3",
		Flags: clientFlags(
			&cli.StringFlag{Name: "from", Value: "latest", Usage: "where to start: earliest, latest or an `OFFSET` (durable streams)"},
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
	opts := felix.SubscribeOptions{Start: start, Shard: uint32(shard)}
	return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		return cursorHint(subscribeAndPrint(ctx, bc, s.Namespace, c.Args().First(), opts, p,
			c.App.ErrWriter, uint64(c.Uint("count"))))
	})
}

// subPosition is how far a sub command has printed.
type subPosition struct {
	printed uint64 // events printed
	last    uint64 // offset of the last event printed, valid when hasLast
	hasLast bool
}

// subscribeAndPrint subscribes and prints events until count of them
// (0: no limit) were printed or ctx ends, which is a clean exit. When a
// durable subscription falls behind, it subscribes again right after the
// last event printed, so the output has no gap and no repeat.
func subscribeAndPrint(ctx context.Context, bc brokerClient, ns, stream string, opts felix.SubscribeOptions,
	p printer, errw io.Writer, count uint64) error {
	var pos subPosition
	resumed := false
	for {
		sub, err := bc.SubscribeFrom(ctx, ns, stream, opts)
		if err != nil {
			if resumed && ctx.Err() != nil { // interrupted while resubscribing
				return nil
			}
			return err
		}
		if !resumed {
			printJoined(errw, sub)
		}
		err = printEvents(ctx, sub, p, count, &pos)
		_ = sub.Close()
		var lagged *felix.SubscriptionLagged
		if !errors.As(err, &lagged) {
			return err
		}
		from := lagged.ResumeFrom
		if pos.hasLast {
			from = pos.last + 1
		}
		fmt.Fprintf(errw, "fell behind the stream; subscribing again at offset %d\n", from)
		opts.Start, resumed = felix.AtOffset(from), true
	}
}

// printEvents prints events until count of them (0: no limit) have been
// printed in all or ctx ends, which is a clean exit. An event at or below
// the last offset printed is a repeat after a resubscribe and is skipped.
func printEvents(ctx context.Context, sub eventSource, p printer, count uint64, pos *subPosition) error {
	w := bufio.NewWriter(p.w)
	defer w.Flush()
	p.w = w
	for count == 0 || pos.printed < count {
		ev, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil { // interrupted: a clean end
				return nil
			}
			return err
		}
		if ev.HasOffset {
			if pos.hasLast && ev.Offset <= pos.last {
				continue
			}
			pos.last, pos.hasLast = ev.Offset, true
		}
		if err := printEvent(p, ev); err != nil {
			return err
		}
		pos.printed++
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func printEvent(p printer, ev felix.Event) error {
	if !p.json {
		return printPayload(p, ev.Payload)
	}
	m := recordJSON(ev.Payload, ev.Offset, ev.HasOffset, ev.Timestamp, ev.Publisher)
	if ev.SkippedBefore != 0 {
		m["skipped_before"] = ev.SkippedBefore
	}
	return p.JSON(m)
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

// printJoined tells where a subscription joined a durable stream, on
// standard error so the output stays the messages alone.
func printJoined(w io.Writer, sub eventSource) {
	start, ok := sub.StartOffset()
	if !ok {
		return
	}
	if live, ok := sub.LiveOffset(); ok {
		fmt.Fprintf(w, "subscribed at offset %d (live from offset %d)\n", start, live)
		return
	}
	fmt.Fprintf(w, "subscribed at offset %d\n", start)
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

package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// maxStdinLine bounds one message read by pub --stdin.
const maxStdinLine = 16 << 20

var errLineTooLong = fmt.Errorf("standard input: a line is longer than %d bytes", maxStdinLine)

func pubCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "pub",
		Usage:     "publish messages to a stream",
		ArgsUsage: "STREAM MSG... (or STREAM --stdin)",
		UsageText: "felix pub STREAM MSG... [--ack] [--key K] [-o json]\nfelix pub STREAM --stdin [--ack] [--key K] [-o json]\n" +
			"felix pub STREAM MSG... --if-offset N [--key K] [-o json]\nfelix pub STREAM (MSG... | --stdin) --idempotent [--key K] [-o json]",
		Description: "Publishes each MSG (or, with --stdin, each line of standard input, up to 16 MiB a line)\n" +
			"as one message to STREAM in the current tenant and namespace. Without --ack the messages\n" +
			"are sent without waiting for the broker and flushed before exit; with --ack each one waits\n" +
			"for its acknowledgement and any refusal is reported. --key routes every message to the\n" +
			"shard that key hashes to.\n\n" +
			"Output: without --ack, nothing in text. With --ack, one line per message, \"offset N\", with\n" +
			"the offset the broker assigned it (durable streams), or, for a stream without offsets, one line\n" +
			"saying how many were acknowledged. -o json prints one document when done:\n" +
			"{\"stream\",\"published\",\"acked\",\"offsets\"} (offsets only with --ack on a durable stream).\n\n" +
			pubIfHelp + "\n\n" +
			pubIdemHelp + "\n\n" +
			"Examples:\n\n" +
			"   felix pub events hello world\n" +
			"   seq 1 1000 | felix pub events --stdin --ack\n" +
			"   felix pub events -- --a-message-starting-with-dashes\n" +
			"   felix pub orders placed --if-offset 42\n" +
			"   felix pub payments charged --idempotent",
		Flags: clientFlags(
			&cli.BoolFlag{Name: "stdin", Usage: "read messages from standard input, one per line"},
			&cli.BoolFlag{Name: "ack", Usage: "wait for the broker to acknowledge each message"},
			&cli.StringFlag{Name: "key", Usage: "publish with routing `KEY` (picks the shard)"},
			ifOffsetFlag(),
			&cli.BoolFlag{Name: flagIdempotent, Usage: "publish through an idempotent producer: each message written once despite re-sends"},
		),
		Action: func(c *cli.Context) error { return runPub(c, tk) },
	})
}

func runPub(c *cli.Context, tk toolkit) error {
	if err := needArgs(c, 1, -1); err != nil {
		return err
	}
	stdin := c.Bool("stdin")
	msgs := c.Args().Tail()
	switch {
	case stdin && len(msgs) > 0:
		return usageErrorf(c, "give messages as arguments or with --stdin, not both")
	case !stdin && len(msgs) == 0:
		return usageErrorf(c, "no message to publish (give MSG arguments or --stdin)")
	}
	if c.Bool(flagIdempotent) {
		switch {
		case c.IsSet(flagIfOffset):
			return usageErrorf(c, "--idempotent and --if-offset do not go together")
		case c.Bool("ack"):
			return usageErrorf(c, "--idempotent always waits for the broker's answer; leave out --ack")
		}
		return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, out printer) error {
			var in io.Reader
			if stdin {
				in = c.App.Reader
			}
			return runPubIdempotent(ctx, c, bc, s.Namespace, out, msgs, in)
		})
	}
	if c.IsSet(flagIfOffset) {
		if c.Bool("ack") {
			return usageErrorf(c, "--if-offset always waits for the broker's answer; leave out --ack")
		}
		return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, out printer) error {
			var in io.Reader
			if stdin {
				in = c.App.Reader
			}
			return runPubIf(ctx, c, bc, s, out, msgs, in)
		})
	}
	return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, out printer) error {
		p := &publisher{client: bc, ns: s.Namespace, stream: c.Args().First(), key: []byte(c.String("key")),
			ack: felix.AckNone, report: newPubReport(out, c.Args().First())}
		if c.Bool("ack") {
			p.ack = felix.AckPerMessage
		}
		var err error
		if stdin {
			err = p.publishLines(ctx, c.App.Reader)
		} else {
			err = p.publishAll(ctx, msgs)
		}
		if err == nil && p.ack == felix.AckNone {
			err = bc.Finish(ctx)
		}
		if err != nil {
			return err
		}
		return p.report.finish(p.ack != felix.AckNone)
	})
}

// publisher sends messages to one stream with one ack mode and key, and
// reports each one that was sent.
type publisher struct {
	client     brokerClient
	ns, stream string
	key        []byte
	ack        felix.AckMode
	report     *pubReport
}

func (p *publisher) publish(ctx context.Context, msg []byte) error {
	var res felix.PublishResult
	var err error
	if len(p.key) > 0 {
		res, err = p.client.PublishKeyedAcked(ctx, p.ns, p.stream, p.key, msg, p.ack)
	} else {
		res, err = p.client.PublishAcked(ctx, p.ns, p.stream, msg, p.ack)
	}
	if err != nil {
		return err
	}
	return p.report.sent(res)
}

func (p *publisher) publishAll(ctx context.Context, msgs []string) error {
	for _, m := range msgs {
		if err := p.publish(ctx, []byte(m)); err != nil {
			return err
		}
	}
	return nil
}

// publishLines publishes each line of r (without its line ending). The
// scanner reuses its buffer, so each line is copied before it is handed
// to the client, which may keep it until the send.
func (p *publisher) publishLines(ctx context.Context, r io.Reader) error {
	return eachLine(r, func(line []byte) error { return p.publish(ctx, line) })
}

// eachLine calls fn with a copy of each line of r (without its line end),
// refusing a line longer than maxStdinLine.
func eachLine(r io.Reader, fn func(line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxStdinLine+2) // room for "\r\n"
	for sc.Scan() {
		if len(sc.Bytes()) > maxStdinLine {
			return errLineTooLong
		}
		if err := fn(bytes.Clone(sc.Bytes())); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return errLineTooLong
		}
		return fmt.Errorf("standard input: %w", err)
	}
	return nil
}

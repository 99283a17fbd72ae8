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
	"github.com/felixmq/felix/wire"
)

// flagIfOffset makes felix pub a conditional publish (publish_if).
const flagIfOffset = "if-offset"

// maxConditionalBatch bounds what pub --if-offset --stdin reads: the
// lines become one batch, which must fit in one frame anyway.
const maxConditionalBatch = maxStdinLine

// pubIfHelp is what pub --help says about --if-offset.
const pubIfHelp = "With --if-offset N the messages go as one batch that is written only if it would start at\n" +
	"offset N, the shard's next offset (a durable stream; --key picks the shard as usual): a writer\n" +
	"that keeps the offset after its last write cannot append after another writer took over. The\n" +
	"check is atomic: of writers racing at one offset exactly one is written. Written, it prints\n" +
	"each message's offset, as --ack does. Refused, nothing is written: it prints \"refused\" with\n" +
	"the shard's current next offset (the tail) on standard error and exits with code 3 (-o json:\n" +
	"{\"stream\",\"written\":false,\"expected\",\"tail\"}). A conditional publish whose answer was lost\n" +
	"is never sent again: the error says the outcome is unknown; read the stream at N to find out."

func ifOffsetFlag() *cli.Uint64Flag {
	return &cli.Uint64Flag{Name: flagIfOffset, Usage: "write the messages as one batch, only if it starts at the shard's next offset `N`", DefaultText: "unconditional"}
}

// runPubIf publishes msgs (or the lines of in) as one conditional batch.
func runPubIf(ctx context.Context, c *cli.Context, bc brokerClient, s Settings, out printer, msgs []string, in io.Reader) error {
	stream, expected := c.Args().First(), c.Uint64(flagIfOffset)
	var payloads [][]byte
	if in != nil {
		var err error
		if payloads, err = readBatchLines(in); err != nil {
			return err
		}
		if len(payloads) == 0 {
			return fmt.Errorf("standard input holds no message: a conditional publish writes at least one")
		}
	} else {
		for _, m := range msgs {
			payloads = append(payloads, []byte(m))
		}
	}
	var key []byte
	if k := c.String("key"); k != "" {
		key = []byte(k)
	}
	off, err := bc.PublishIf(ctx, s.Namespace, stream, key, payloads, expected)
	var om *felix.OffsetMismatchError
	if errors.As(err, &om) {
		if out.json {
			if err := out.JSON(map[string]any{"stream": stream, "written": false, "expected": expected, "tail": om.Tail}); err != nil {
				return err
			}
		}
		return cli.Exit(fmt.Sprintf("refused: the shard of stream %s is at offset %d, not %d; nothing was written", stream, om.Tail, expected), exitConditionRefused)
	}
	if err != nil {
		return withHint(err, string(wire.CodeInvalidRequest),
			"a conditional publish (--if-offset) needs a durable stream; create one with felix admin stream create NAME --durable")
	}
	if out.json {
		offs := make([]uint64, len(payloads))
		for i := range offs {
			offs[i] = off + uint64(i)
		}
		return out.JSON(map[string]any{"stream": stream, "published": len(payloads), "acked": true, "written": true, "offsets": offs})
	}
	for i := range payloads {
		if err := out.Line("offset %d", off+uint64(i)); err != nil {
			return err
		}
	}
	return nil
}

// readBatchLines reads the lines of r (without their endings) as one
// batch of at most maxConditionalBatch bytes.
func readBatchLines(r io.Reader) ([][]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxStdinLine+2) // room for "\r\n"
	var out [][]byte
	total := 0
	for sc.Scan() {
		if len(sc.Bytes()) > maxStdinLine {
			return nil, errLineTooLong
		}
		total += len(sc.Bytes())
		if total > maxConditionalBatch {
			return nil, fmt.Errorf("standard input: more than %d bytes; a conditional publish is one batch and must fit in one frame", maxConditionalBatch)
		}
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, errLineTooLong
		}
		return nil, fmt.Errorf("standard input: %w", err)
	}
	return out, nil
}

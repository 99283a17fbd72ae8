package cli

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// flagIdempotent makes felix pub publish through an idempotent producer.
const flagIdempotent = "idempotent"

// pubIdemHelp is what pub --help says about --idempotent.
const pubIdemHelp = "With --idempotent the messages go through an idempotent producer (one producer, with a fresh\n" +
	"producer id, per invocation): each waits for its answer, and a message whose answer was lost\n" +
	"is sent again identically, so the broker writes it once. Exactly-once holds within this\n" +
	"invocation's retries only: running the command again publishes the messages again. With --stdin\n" +
	"each line is a message. It prints each message's offset, as --ack does\n" +
	"(-o json: {\"stream\",\"published\",\"acked\",\"offsets\"})."

// producerMaker is the part of *felix.Client and *felix.ClusterClient
// that starts an idempotent producer.
type producerMaker interface {
	IdempotentProducer(ctx context.Context) (*felix.IdempotentProducer, error)
}

// producerOf returns what starts idempotent producers on a connected client.
func producerOf(bc brokerClient) (producerMaker, error) {
	return sdkAs[producerMaker](bc, "start an idempotent producer")
}

// runPubIdempotent publishes msgs, or each line of in when in is not nil,
// one by one through one idempotent producer, reporting each offset as
// pub --ack does.
func runPubIdempotent(ctx context.Context, c *cli.Context, bc brokerClient, ns string, out printer, msgs []string, in io.Reader) (err error) {
	pm, err := producerOf(bc)
	if err != nil {
		return err
	}
	prod, err := pm.IdempotentProducer(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := prod.Close(ctx); err == nil && cerr != nil {
			err = cerr
		}
	}()
	stream, key := c.Args().First(), []byte(c.String("key"))
	report := newPubReport(out, stream)
	send := func(m []byte) error {
		var off uint64
		var err error
		if len(key) > 0 {
			off, err = prod.PublishKeyed(ctx, ns, stream, key, m)
		} else {
			off, err = prod.Publish(ctx, ns, stream, m)
		}
		if err != nil {
			return err
		}
		return report.sent(felix.PublishResult{Offset: off, HasOffset: true})
	}
	if in != nil {
		err = eachLine(in, send)
	} else {
		for _, m := range msgs {
			if err = send([]byte(m)); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	return report.finish(true)
}

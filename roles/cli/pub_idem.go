package cli

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// flagIdempotent makes felix pub publish through an idempotent producer.
const flagIdempotent = "idempotent"

// pubIdemHelp is what pub --help says about --idempotent.
const pubIdemHelp = "With --idempotent the messages go through an idempotent producer (one producer, with a fresh\n" +
	"producer id, per invocation): each waits for its answer, and a message whose answer was lost\n" +
	"is sent again identically, so the broker writes it once. Exactly-once holds within this\n" +
	"invocation's retries only: running the command again publishes the messages again. It prints\n" +
	"each message's offset, as --ack does (-o json: {\"stream\",\"published\",\"acked\",\"offsets\"})."

// producerMaker is the part of *felix.Client and *felix.ClusterClient
// that starts an idempotent producer.
type producerMaker interface {
	IdempotentProducer(ctx context.Context) (*felix.IdempotentProducer, error)
}

// producerOf returns what starts idempotent producers on a connected client.
func producerOf(bc brokerClient) (producerMaker, error) {
	return sdkAs[producerMaker](bc, "start an idempotent producer")
}

// runPubIdempotent publishes msgs one by one through one idempotent
// producer, printing each offset.
func runPubIdempotent(ctx context.Context, c *cli.Context, bc brokerClient, ns string, out printer, msgs []string) (err error) {
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
	offs := make([]uint64, 0, len(msgs))
	for _, m := range msgs {
		var off uint64
		if len(key) > 0 {
			off, err = prod.PublishKeyed(ctx, ns, stream, key, []byte(m))
		} else {
			off, err = prod.Publish(ctx, ns, stream, []byte(m))
		}
		if err != nil {
			return err
		}
		offs = append(offs, off)
		if !out.json {
			if err := out.Line("offset %d", off); err != nil {
				return err
			}
		}
	}
	if out.json {
		return out.JSON(map[string]any{"stream": stream, "published": len(msgs), "acked": true, "offsets": offs})
	}
	return nil
}

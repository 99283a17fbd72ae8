package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// streamInfoCommand is felix admin stream info: it asks the broker, which
// knows offsets and subscribers, not the control plane.
func streamInfoCommand() *cli.Command {
	tk := toolkit{connect: dialBroker}
	return leaf(&cli.Command{
		Name:      "info",
		Usage:     "show a stream's shards: offsets, records, bytes, subscribers and rates (asks the broker)",
		ArgsUsage: "STREAM",
		UsageText: "felix admin stream info STREAM [--interval DURATION] [-o json]",
		Description: "Asks the broker (--broker, else client.json) for every shard of STREAM: the first and last\n" +
			"offset, record count and bytes a durable shard's log holds, the next offset, the subscribers on\n" +
			"that broker, and the publish and delivery rates, measured between two looks --interval apart\n" +
			"(0 for one look and no rates). Needs stream.subscribe on the stream. Examples:\n\n" +
			"   felix admin stream info events\n" +
			"   felix admin stream info events --interval 0 -o json",
		Flags: clientFlags(
			&cli.DurationFlag{Name: "interval", Usage: "measure rates over `DURATION` (0: no rates)", Value: time.Second},
		),
		Action: func(c *cli.Context) error { return runStreamInfo(c, tk) },
	})
}

func runStreamInfo(c *cli.Context, tk toolkit) error {
	if err := needArgs(c, 1, 1); err != nil {
		return err
	}
	interval := c.Duration("interval")
	if interval < 0 {
		return usageErrorf(c, "--interval %v: want 0 or more", interval)
	}
	stream := c.Args().First()
	return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		fc, err := sdkClientOf(bc)
		if err != nil {
			return err
		}
		look := func() (*felix.StreamInfo, error) {
			return retryPatiently(ctx, func() (*felix.StreamInfo, error) { return fc.StreamInfo(ctx, s.Namespace, stream) })
		}
		first, err := look()
		if err != nil {
			return err
		}
		var last *felix.StreamInfo
		if interval > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(interval):
			}
			if last, err = look(); err != nil {
				return err
			}
		}
		return printStreamInfo(p, first, last)
	})
}

// printStreamInfo prints info (last when there are two looks, with the
// rates between them).
func printStreamInfo(p printer, first, last *felix.StreamInfo) error {
	info := first
	if last != nil {
		info = last
	}
	shards := make([]map[string]any, len(info.Shards))
	rows := make([][]string, len(info.Shards))
	for i, sh := range info.Shards {
		js := map[string]any{"shard": sh.Shard, "next_offset": sh.NextOffset, "subscribers": sh.Subscribers,
			"published_total": sh.PublishedTotal, "delivered_total": sh.DeliveredTotal}
		pubRate, delRate := "-", "-"
		if last != nil {
			pr, dr := last.Rate(first, i)
			js["publish_rate"], js["delivery_rate"] = pr, dr
			pubRate, delRate = fmt.Sprintf("%.1f/s", pr), fmt.Sprintf("%.1f/s", dr)
		}
		firstOff, lastOff, records, size := "-", "-", "-", "-"
		if info.Durable {
			js["records"], js["bytes"] = sh.Records, sh.Bytes
			records, size = strconv.FormatUint(sh.Records, 10), strconv.FormatInt(sh.Bytes, 10)
			if sh.HasRecords {
				js["first_offset"], js["last_offset"] = sh.FirstOffset, sh.LastOffset
				firstOff, lastOff = strconv.FormatUint(sh.FirstOffset, 10), strconv.FormatUint(sh.LastOffset, 10)
			}
			if sh.Unavailable != "" {
				js["unavailable"] = sh.Unavailable
				records, size = "unavailable", "-"
			}
		}
		shards[i] = js
		rows[i] = []string{strconv.Itoa(int(sh.Shard)), firstOff, lastOff, strconv.FormatUint(sh.NextOffset, 10), records, size,
			strconv.Itoa(sh.Subscribers), pubRate, delRate}
	}
	if p.json {
		return p.JSON(map[string]any{"namespace": info.Namespace, "stream": info.Stream, "durable": info.Durable,
			"at": info.At.UTC().Format(time.RFC3339Nano), "shards": shards})
	}
	return p.Table([]string{"SHARD", "FIRST", "LAST", "NEXT", "RECORDS", "BYTES", "SUBSCRIBERS", "PUBLISH", "DELIVERY"}, rows)
}

// sdkClientOf returns the Go client behind bc, for the requests the
// brokerClient interface does not carry.
func sdkClientOf(bc brokerClient) (*felix.Client, error) {
	switch v := bc.(type) {
	case patientClient:
		return sdkClientOf(v.brokerClient)
	case sdkClient:
		return v.Client, nil
	case *clusterClient:
		return v.single(context.Background()) // bounded by --connect-timeout per broker
	}
	return nil, errors.New("this command needs a connection to a broker")
}

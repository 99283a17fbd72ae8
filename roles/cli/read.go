package cli

import (
	"bufio"
	"context"
	"errors"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

func readCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "read",
		Usage:     "print a range of a durable stream's records and stop",
		ArgsUsage: "STREAM",
		UsageText: "felix read STREAM [--from earliest|OFFSET] [--end OFFSET] [--shard N] [--max-records N] [--count N] [-o json]",
		Description: "Reads the committed records of one shard of a durable STREAM page by page, from --from up to\n" +
			"(not including) --end, or up to what is committed now when --end is not given, then exits. No\n" +
			"subscription is opened. Text output is each payload on its own line; with -o json each line is\n" +
			"{\"offset\": n, \"time\": RFC 3339, \"publisher\": ..., \"payload\": ...} (payload_base64 for a\n" +
			"payload that is not UTF-8). A --from the stream no longer holds, or past its end, fails with\n" +
			"the nearest offset that would work (--from earliest starts at the oldest record kept).\n" +
			"Examples:\n\n" +
			"   felix read events --from 1200 --end 1300\n" +
			"   felix read events --from earliest --count 10 -o json",
		Flags: clientFlags(
			&cli.StringFlag{Name: "from", Value: "earliest", Usage: "first `OFFSET` to read, or earliest"},
			&cli.Uint64Flag{Name: "end", Usage: "stop before `OFFSET`", DefaultText: "what is committed now"},
			&cli.UintFlag{Name: "shard", Usage: "shard `N` of the stream to read", DefaultText: "0"},
			&cli.UintFlag{Name: "max-records", Usage: "records per page, at most `N`", DefaultText: "the broker's cap"},
			&cli.UintFlag{Name: "count", Usage: "stop after `N` records", DefaultText: "no limit"},
		),
		Action: func(c *cli.Context) error { return runRead(c, tk) },
	})
}

// readRange is what a read command asks for.
type readRange struct {
	shard      uint32
	from       uint64
	earliest   bool    // from is "earliest": a too-old start moves up
	end        *uint64 // nil: up to what is committed
	maxRecords int     // per page; 0: the broker's cap
	count      uint64  // total; 0: no limit
}

func parseReadRange(c *cli.Context) (readRange, error) {
	r := readRange{maxRecords: int(min(c.Uint("max-records"), 1<<31-1)), count: c.Uint64("count")}
	shard, err := shardFlag(c)
	if err != nil {
		return r, err
	}
	r.shard = shard
	if from := c.String("from"); from == "earliest" {
		r.earliest = true
	} else if r.from, err = strconv.ParseUint(from, 10, 64); err != nil {
		return r, usageErrorf(c, "--from %q: want earliest or an offset", from)
	}
	if c.IsSet("end") {
		end := c.Uint64("end")
		if end < r.from {
			return r, usageErrorf(c, "--end %d is before --from %d", end, r.from)
		}
		r.end = &end
	}
	return r, nil
}

// shardFlag reads --shard.
func shardFlag(c *cli.Context) (uint32, error) {
	shard := c.Uint("shard")
	if uint64(shard) > uint64(^uint32(0)) {
		return 0, usageErrorf(c, "--shard %d is out of range", shard)
	}
	return uint32(shard), nil
}

func runRead(c *cli.Context, tk toolkit) error {
	if err := needArgs(c, 1, 1); err != nil {
		return err
	}
	r, err := parseReadRange(c)
	if err != nil {
		return err
	}
	return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		err := readPages(ctx, bc, s.Namespace, c.Args().First(), r, p)
		if ctx.Err() != nil { // interrupted: a clean end
			return nil
		}
		return cursorHint(err)
	})
}

// readPages reads and prints pages until the range is done, a page comes
// back empty or count records were printed.
func readPages(ctx context.Context, bc brokerClient, ns, stream string, r readRange, p printer) error {
	w := bufio.NewWriter(p.w)
	defer w.Flush()
	p.w = w
	from, printed := r.from, uint64(0)
	for r.end == nil || from < *r.end {
		page, err := bc.Read(ctx, ns, stream, r.shard, from, r.end, pageSize(r, printed))
		var ce *felix.SubscribeCursorError
		if r.earliest && errors.As(err, &ce) && ce.TooOld && ce.Available > from {
			from = ce.Available // earliest: start at what retention kept
			continue
		}
		if err != nil {
			return err
		}
		if len(page.Records) == 0 {
			return nil
		}
		for _, rec := range page.Records {
			if err := printRecord(p, rec); err != nil {
				return err
			}
			if printed++; printed == r.count {
				return nil
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if page.NextOffset <= from { // a broker that does not advance: stop rather than spin
			return nil
		}
		from = page.NextOffset
	}
	return nil
}

// pageSize asks for no more than the records still wanted.
func pageSize(r readRange, printed uint64) int {
	if r.count == 0 {
		return r.maxRecords
	}
	left := int(min(r.count-printed, 1<<31-1))
	if r.maxRecords == 0 {
		return left
	}
	return min(left, r.maxRecords)
}

func printRecord(p printer, rec felix.Record) error {
	if !p.json {
		return printPayload(p, rec.Payload)
	}
	return p.JSON(recordJSON(rec.Payload, rec.Offset, true, rec.Timestamp, rec.Publisher))
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// groupCommand is `felix group …`: consumer groups on one shard of a
// durable stream (FEATURE_CONSUMER_GROUP; brokers with durable storage).
func groupCommand(tk toolkit) *cli.Command {
	return group(&cli.Command{
		Name:      "group",
		Usage:     "work a stream as a queue: poll, acknowledge, hand back, dead letters, cursors",
		UsageText: "felix group poll|consume|ack|nack|describe|seek|delete|dead-letters|redrive|discard STREAM GROUP ...",
		Description: "A consumer group hands each record of one shard of a durable STREAM to one consumer and\n" +
			"takes it back unless it is acknowledged within its visibility (FELIX_GROUP_VISIBILITY_TIMEOUT_MS,\n" +
			"30 s). The group's cursor advances over acknowledged records only, and is kept beside the\n" +
			"shard's log, so a broker restart keeps it. A record delivered FELIX_GROUP_MAX_ATTEMPTS (5)\n" +
			"times is dead-lettered. Delivery is at least once. A group lives on one shard: poll, consume,\n" +
			"describe, seek and delete work every shard of the stream unless --shard N names one (the\n" +
			"shards polled at once, each on its owner); ack, nack, dead-letters, redrive and discard take\n" +
			"the shard of their offsets (--shard, default 0). Example:\n\n" +
			"   felix group poll jobs workers --max 10 --wait 5s\n" +
			"   felix group ack jobs workers 41 42\n" +
			"   felix group describe jobs workers",
		Subcommands: []*cli.Command{groupPollCommand(tk), groupConsumeCommand(tk), groupAckCommand(tk), groupNackCommand(tk),
			groupDescribeCommand(tk), groupSeekCommand(tk), groupDeleteCommand(tk), groupDeadLettersCommand(tk),
			groupOffsetCommand(tk, "redrive", "put a dead letter back in play"),
			groupOffsetCommand(tk, "discard", "drop a dead letter from the list")},
	})
}

// groupClient is the part of *felix.Client and *felix.ClusterClient the
// group commands use.
type groupClient interface {
	GroupPoll(ctx context.Context, namespace, stream string, shard uint32, group string, maxRecords int, opts felix.GroupPollOptions) ([]felix.GroupRecord, error)
	GroupAck(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error
	GroupNack(ctx context.Context, namespace, stream string, shard uint32, group string, rec felix.GroupRecord, delay time.Duration) error
	GroupDeadLetters(ctx context.Context, namespace, stream string, shard uint32, group string) ([]uint64, error)
	GroupDiscard(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error
	GroupRedrive(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error
	GroupSeek(ctx context.Context, namespace, stream string, shard uint32, group string, start felix.GroupStart, ifNew bool) (uint64, bool, error)
	GroupDescribe(ctx context.Context, namespace, stream string, shard uint32, group string) (felix.GroupInfo, error)
	GroupDelete(ctx context.Context, namespace, stream string, shard uint32, group string) (bool, error)
	GroupSharded(ctx context.Context, namespace, stream, group string) (*felix.ShardedGroup, error)
	GroupSeekStream(ctx context.Context, namespace, stream, group string, start felix.GroupStart) ([]felix.GroupPosition, error)
	GroupCreateStream(ctx context.Context, namespace, stream, group string, start felix.GroupStart) ([]felix.GroupPosition, error)
	GroupDescribeStream(ctx context.Context, namespace, stream, group string) ([]felix.GroupInfo, error)
	GroupDeleteStream(ctx context.Context, namespace, stream, group string) ([]bool, error)
}

// sdkAs returns the SDK client behind bc (a *felix.Client or a
// *felix.ClusterClient) as T, or bc itself when it is a T (a test's
// fake); what names the calls T stands for, for the error.
func sdkAs[T any](bc brokerClient, what string) (T, error) {
	if p, ok := bc.(patientClient); ok {
		bc = p.brokerClient
	}
	var c any = bc
	switch v := bc.(type) {
	case sdkClient:
		c = v.Client
	case *clusterClient:
		c = v.ClusterClient
	}
	if t, ok := c.(T); ok {
		return t, nil
	}
	var zero T
	return zero, errors.New("this client cannot " + what)
}

// groupsOf returns the group calls of a connected client.
func groupsOf(bc brokerClient) (groupClient, error) {
	return sdkAs[groupClient](bc, "work consumer groups")
}

// groupTarget is what every group command names: namespace, stream,
// shard and group.
type groupTarget struct {
	ns, stream, group string
	shard             uint32
	// every is set when --shard was left out of a command that works
	// every shard of the stream.
	every bool
}

// withGroup checks at least min (at most max) arguments, the first two
// STREAM GROUP, connects and runs fn.
func withGroup(c *cli.Context, tk toolkit, min, max int, interruptible bool, fn func(ctx context.Context, gc groupClient, t groupTarget, p printer) error) error {
	if err := needArgs(c, min, max); err != nil {
		return err
	}
	shard, err := shardFlag(c)
	if err != nil {
		return err
	}
	return runBroker(c, tk, interruptible, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		gc, err := groupsOf(bc)
		if err != nil {
			return err
		}
		return fn(ctx, gc, groupTarget{ns: s.Namespace, stream: c.Args().Get(0), group: c.Args().Get(1), shard: shard,
			every: !c.IsSet("shard") && everyShardFlag(c)}, p)
	})
}

func groupShardFlag() cli.Flag {
	return &cli.UintFlag{Name: "shard", Usage: "shard `N` of the stream the group works", DefaultText: "0"}
}

// groupEveryShardFlag is --shard of a command that works every shard
// when it is left out.
func groupEveryShardFlag() cli.Flag {
	return &cli.UintFlag{Name: "shard", Usage: "work shard `N` alone", DefaultText: "every shard"}
}

// everyShardFlag reports whether the command's --shard defaults to every
// shard.
func everyShardFlag(c *cli.Context) bool {
	for _, f := range c.Command.Flags {
		if u, ok := f.(*cli.UintFlag); ok && u.Name == "shard" {
			return u.DefaultText == "every shard"
		}
	}
	return false
}

func groupPollCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "poll",
		Usage:     "claim records and print them (not acknowledged)",
		ArgsUsage: "STREAM GROUP",
		UsageText: "felix group poll STREAM GROUP [--max N] [--wait D] [--visibility D] [--shard N] [-o json]",
		Description: "Claims up to --max records for GROUP and prints each as OFFSET, ATTEMPTS and the payload,\n" +
			"tab-separated (-o json: one {\"shard\",\"offset\",\"attempts\",\"payload\"} per line). ATTEMPTS is 1 on a\n" +
			"first delivery. The records are claimed, not finished: acknowledge each with \"felix group ack\"\n" +
			"(with --shard of its shard), or it comes round again once its visibility lapses. --wait lets the\n" +
			"broker hold the poll open for work (capped by FELIX_GROUP_MAX_WAIT_MS); nothing available prints\n" +
			"nothing. Without --shard every shard of the stream is polled at once, each on its owner; on a\n" +
			"stream of several shards each line then starts with the record's SHARD. Example:\n\n" +
			"   felix group poll jobs workers --max 10 --wait 5s --visibility 2m",
		Flags: clientFlags(groupEveryShardFlag(),
			&cli.IntFlag{Name: "max", Value: 10, Usage: "claim at most `N` records"},
			&cli.DurationFlag{Name: "wait", Usage: "wait up to `D` for work (0: answer at once)"},
			&cli.DurationFlag{Name: "visibility", Usage: "claims stand for `D` (default: the broker's visibility timeout)"}),
		Action: func(c *cli.Context) error {
			if c.Int("max") < 1 {
				return usageErrorf(c, "--max must be at least 1")
			}
			return withGroup(c, tk, 2, 2, true, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				gr, err := openGroupReader(ctx, gc, t)
				if err != nil {
					return err
				}
				recs, err := gr.poll(ctx, c.Int("max"), felix.GroupPollOptions{Wait: c.Duration("wait"), Visibility: c.Duration("visibility")})
				for _, r := range recs {
					if perr := printGroupRecord(p, r, gr.shards > 1); perr != nil && err == nil {
						err = perr
					}
				}
				if cerr := gr.close(); err == nil {
					err = cerr
				}
				return err
			})
		},
	})
}

// printGroupRecord prints a record: OFFSET ATTEMPTS PAYLOAD, led by its
// SHARD when withShard (the group reads several shards).
func printGroupRecord(p printer, r felix.GroupRecord, withShard bool) error {
	if p.json {
		m := recordJSON(r.Payload, r.Offset, true, time.Time{}, r.Publisher)
		m["attempts"] = r.Attempts
		m["shard"] = r.Shard
		return p.JSON(m)
	}
	if withShard {
		return p.Line("%d\t%d\t%d\t%s", r.Shard, r.Offset, r.Attempts, r.Payload)
	}
	return p.Line("%d\t%d\t%s", r.Offset, r.Attempts, r.Payload)
}

// groupReader polls and acks one shard's group, or every shard's merged.
type groupReader struct {
	poll   func(ctx context.Context, maxRecords int, opts felix.GroupPollOptions) ([]felix.GroupRecord, error)
	ack    func(ctx context.Context, rec felix.GroupRecord) error
	close  func() error
	shards int
}

func openGroupReader(ctx context.Context, gc groupClient, t groupTarget) (*groupReader, error) {
	if t.every {
		sg, err := gc.GroupSharded(ctx, t.ns, t.stream, t.group)
		if err != nil {
			return nil, err
		}
		return &groupReader{poll: sg.Poll, ack: sg.Ack, close: sg.Close, shards: sg.Shards()}, nil
	}
	return &groupReader{
		poll: func(ctx context.Context, maxRecords int, opts felix.GroupPollOptions) ([]felix.GroupRecord, error) {
			return gc.GroupPoll(ctx, t.ns, t.stream, t.shard, t.group, maxRecords, opts)
		},
		ack: func(ctx context.Context, r felix.GroupRecord) error {
			return gc.GroupAck(ctx, t.ns, t.stream, r.Shard, t.group, r.Offset)
		},
		close:  func() error { return nil },
		shards: 1,
	}, nil
}

func groupConsumeCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "consume",
		Usage:     "print and acknowledge records until stopped",
		ArgsUsage: "STREAM GROUP",
		UsageText: "felix group consume STREAM GROUP [--count N] [--shard N] [-o json]",
		Description: "Polls GROUP, prints each record as \"felix group poll\" does and acknowledges it once printed,\n" +
			"until interrupted (Ctrl-C) or --count records were printed. Without --shard it consumes every\n" +
			"shard of the stream, each polled on its owner at once (a shard whose owner is down is tried\n" +
			"again while the others carry on). Example:\n\n" +
			"   felix group consume jobs workers --count 100",
		Flags: clientFlags(groupEveryShardFlag(),
			&cli.Uint64Flag{Name: "count", Usage: "stop after `N` records (0: never)"}),
		Action: func(c *cli.Context) error {
			return withGroup(c, tk, 2, 2, true, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				return consumeGroup(ctx, gc, t, c.Uint64("count"), p)
			})
		},
	})
}

func consumeGroup(ctx context.Context, gc groupClient, t groupTarget, count uint64, p printer) (err error) {
	gr, err := openGroupReader(ctx, gc, t)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := gr.close(); err == nil {
			err = cerr
		}
	}()
	var done uint64
	for count == 0 || done < count {
		want := 32
		if count > 0 {
			want = int(min(uint64(want), count-done))
		}
		recs, err := gr.poll(ctx, want, felix.GroupPollOptions{Wait: 5 * time.Second})
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := printGroupRecord(p, r, gr.shards > 1); err != nil {
				return err
			}
			if err := gr.ack(ctx, r); err != nil {
				return err
			}
			done++
		}
	}
	return nil
}

func parseOffsets(c *cli.Context, args []string) ([]uint64, error) {
	out := make([]uint64, len(args))
	for i, a := range args {
		o, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return nil, usageErrorf(c, "OFFSET %q is not an offset", a)
		}
		out[i] = o
	}
	return out, nil
}

func groupAckCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "ack",
		Usage:     "acknowledge records: they are finished",
		ArgsUsage: "STREAM GROUP OFFSET...",
		UsageText: "felix group ack STREAM GROUP OFFSET... [--shard N]",
		Description: "Finishes each OFFSET for GROUP. The cursor advances only over a contiguous run of\n" +
			"finished records. Acknowledging a finished record again is not an error; one this broker\n" +
			"never handed out (after a seek) is refused stale_claim. Example:\n\n" +
			"   felix group ack jobs workers 41 42",
		Flags: clientFlags(groupShardFlag()),
		Action: func(c *cli.Context) error {
			offs, err := parseOffsets(c, c.Args().Slice()[min(2, c.NArg()):])
			if err != nil {
				return err
			}
			return withGroup(c, tk, 3, -1, false, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				for _, o := range offs {
					if err := gc.GroupAck(ctx, t.ns, t.stream, t.shard, t.group, o); err != nil {
						return fmt.Errorf("ack %d: %w", o, err)
					}
				}
				return nil
			})
		},
	})
}

func groupNackCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "nack",
		Usage:     "hand a record back for redelivery",
		ArgsUsage: "STREAM GROUP OFFSET",
		UsageText: "felix group nack STREAM GROUP OFFSET [--delay D] [--attempts N] [--shard N]",
		Description: "Hands OFFSET back to GROUP: it is delivered again at once, or after --delay. --attempts names\n" +
			"the delivery handed back (the ATTEMPTS \"felix group poll\" printed), so a late nack cannot take\n" +
			"the record from a consumer that got it since; without it, whatever claim stands is handed\n" +
			"back. Example:\n\n" +
			"   felix group nack jobs workers 41 --attempts 1 --delay 30s",
		Flags: clientFlags(groupShardFlag(),
			&cli.DurationFlag{Name: "delay", Usage: "deliver again after `D`"},
			&cli.UintFlag{Name: "attempts", Usage: "the delivery `N` handed back"}),
		Action: func(c *cli.Context) error {
			offs, err := parseOffsets(c, c.Args().Slice()[min(2, c.NArg()):])
			if err != nil {
				return err
			}
			return withGroup(c, tk, 3, 3, false, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				rec := felix.GroupRecord{Offset: offs[0], Attempts: uint32(c.Uint("attempts"))}
				return gc.GroupNack(ctx, t.ns, t.stream, t.shard, t.group, rec, c.Duration("delay"))
			})
		},
	})
}

func groupDescribeCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "describe",
		Usage:     "print a group's cursor, the shard's tail and the group's counts",
		ArgsUsage: "STREAM GROUP",
		UsageText: "felix group describe STREAM GROUP [--shard N] [-o json]",
		Description: "Prints committed (the cursor: every offset below it is finished; \"none\" for a group with\n" +
			"no cursor), tail (the shard's next offset), in_flight (claims standing), owed (records due\n" +
			"again) and dead_letters. in_flight and owed are the leader's memory. Without --shard every\n" +
			"shard is described, each by its owner: on a stream of several shards, one line per shard\n" +
			"(\"shard N committed C tail T ...\"); -o json prints one object per shard, each with its\n" +
			"\"shard\". A shard that cannot be asked is reported on standard error and the command exits\n" +
			"with code 1 after printing the others. Example:\n\n" +
			"   felix group describe jobs workers -o json",
		Flags: clientFlags(groupEveryShardFlag()),
		Action: func(c *cli.Context) error {
			return withGroup(c, tk, 2, 2, false, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				if !t.every {
					info, err := gc.GroupDescribe(ctx, t.ns, t.stream, t.shard, t.group)
					if err != nil {
						return err
					}
					return printGroupInfo(p, t, info, false)
				}
				infos, err := gc.GroupDescribeStream(ctx, t.ns, t.stream, t.group)
				failed := failedShards(err)
				for shard, info := range infos {
					if failed[uint32(shard)] {
						continue
					}
					if perr := printGroupInfo(p, t, info, len(infos) > 1); perr != nil {
						return perr
					}
				}
				return err
			})
		},
	})
}

// failedShards returns the shards a call on every shard of a stream
// failed on.
func failedShards(err error) map[uint32]bool {
	out := map[uint32]bool{}
	for _, se := range felix.FailedShards(err) {
		out[se.Shard] = true
	}
	return out
}

// printGroupInfo prints one shard's group_info: as lines of NAME VALUE, or
// as one line led by its shard when oneLine.
func printGroupInfo(p printer, t groupTarget, info felix.GroupInfo, oneLine bool) error {
	m := map[string]any{"stream": t.stream, "group": t.group, "shard": info.Shard, "tail": info.Tail,
		"in_flight": info.InFlight, "owed": info.Owed, "dead_letters": info.DeadLetters}
	committed := "none"
	if info.Committed != nil {
		m["committed"] = *info.Committed
		committed = strconv.FormatUint(*info.Committed, 10)
	}
	if p.json {
		return p.JSON(m)
	}
	if oneLine {
		return p.Line("shard %d committed %s tail %d in_flight %d owed %d dead_letters %d", info.Shard, committed, info.Tail, info.InFlight, info.Owed, info.DeadLetters)
	}
	return p.Line("committed %s\ntail %d\nin_flight %d\nowed %d\ndead_letters %d", committed, info.Tail, info.InFlight, info.Owed, info.DeadLetters)
}

func groupSeekCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "seek",
		Usage:     "move a group's cursor (or create the group there)",
		ArgsUsage: "STREAM GROUP earliest|latest|OFFSET",
		UsageText: "felix group seek STREAM GROUP earliest|latest|OFFSET [--if-new] [--shard N] [-o json]",
		Description: "Moves GROUP's cursor to the oldest record the shard holds (earliest), the shard's tail\n" +
			"(latest) or OFFSET between them, voiding the claims standing (dead letters are kept). With\n" +
			"--if-new only a group that does not exist yet moves: that creates a group somewhere other\n" +
			"than the oldest record. Prints the cursor and whether it moved. Without --shard every shard\n" +
			"of the stream is moved, each by its owner, and each prints a line led by its shard\n" +
			"(\"shard N OFFSET\"; -o json: one object per shard); OFFSET is per shard, so it needs --shard on a\n" +
			"stream of several shards. Needs group.manage. Example:\n\n" +
			"   felix group seek jobs workers latest --if-new",
		Flags: clientFlags(groupEveryShardFlag(), &cli.BoolFlag{Name: "if-new", Usage: "move only a group that does not exist yet"}),
		Action: func(c *cli.Context) error {
			var start felix.GroupStart
			atOffset := false
			switch a := c.Args().Get(2); a {
			case "earliest":
				start = felix.GroupEarliest
			case "latest":
				start = felix.GroupLatest
			default:
				o, err := strconv.ParseUint(a, 10, 64)
				if err != nil && c.NArg() >= 3 {
					return usageErrorf(c, "%q is not earliest, latest or an offset", a)
				}
				start, atOffset = felix.GroupAt(o), true
			}
			return withGroup(c, tk, 3, 3, false, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				if !t.every {
					off, moved, err := gc.GroupSeek(ctx, t.ns, t.stream, t.shard, t.group, start, c.Bool("if-new"))
					if err != nil {
						return err
					}
					return printGroupPosition(p, t, felix.GroupPosition{Shard: t.shard, Offset: off, Moved: moved}, false)
				}
				if atOffset {
					if info, err := gc.GroupDescribeStream(ctx, t.ns, t.stream, t.group); err == nil && len(info) > 1 {
						return usageErrorf(c, "an OFFSET is per shard: name the shard with --shard (the stream has %d)", len(info))
					}
				}
				seek := gc.GroupSeekStream
				if c.Bool("if-new") {
					seek = gc.GroupCreateStream
				}
				pos, err := seek(ctx, t.ns, t.stream, t.group, start)
				failed := failedShards(err)
				for shard, at := range pos {
					if failed[uint32(shard)] {
						continue
					}
					if perr := printGroupPosition(p, t, at, len(pos) > 1); perr != nil {
						return perr
					}
				}
				return err
			})
		},
	})
}

// printGroupPosition prints where a seek left the group on one shard,
// led by the shard when withShard.
func printGroupPosition(p printer, t groupTarget, at felix.GroupPosition, withShard bool) error {
	if p.json {
		return p.JSON(map[string]any{"stream": t.stream, "group": t.group, "shard": at.Shard, "offset": at.Offset, "moved": at.Moved})
	}
	line := strconv.FormatUint(at.Offset, 10)
	if !at.Moved {
		line += " (not moved: the group exists)"
	}
	if withShard {
		line = fmt.Sprintf("shard %d %s", at.Shard, line)
	}
	return p.Line("%s", line)
}

func groupDeleteCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "delete",
		Usage:     "remove a group's cursor and dead letters",
		ArgsUsage: "STREAM GROUP",
		UsageText: "felix group delete STREAM GROUP [--shard N]",
		Description: "Removes GROUP's cursor and dead letters on the shard (without --shard: on every shard of\n" +
			"the stream, each by its owner); its next poll starts afresh at the oldest record. A group\n" +
			"that existed on no shard prints \"no such group\" and exits with code 1. Needs group.manage.\n" +
			"Example:\n\n   felix group delete jobs workers",
		Flags: clientFlags(groupEveryShardFlag()),
		Action: func(c *cli.Context) error {
			return withGroup(c, tk, 2, 2, false, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				if !t.every {
					existed, err := gc.GroupDelete(ctx, t.ns, t.stream, t.shard, t.group)
					if err != nil {
						return err
					}
					if !existed {
						return cli.Exit(fmt.Sprintf("no such group: %s on shard %d of %s", t.group, t.shard, t.stream), exitGeneric)
					}
					return nil
				}
				existed, err := gc.GroupDeleteStream(ctx, t.ns, t.stream, t.group)
				if err != nil {
					return err
				}
				if !slices.Contains(existed, true) {
					return cli.Exit(fmt.Sprintf("no such group: %s on any shard of %s", t.group, t.stream), exitGeneric)
				}
				return nil
			})
		},
	})
}

func groupDeadLettersCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "dead-letters",
		Usage:     "list a group's dead letters",
		ArgsUsage: "STREAM GROUP",
		UsageText: "felix group dead-letters STREAM GROUP [--shard N] [-o json]",
		Description: "Prints the offsets GROUP dead-lettered, one a line (-o json: {\"offsets\": [...]}). A dead\n" +
			"letter is a pointer: \"felix read STREAM --from OFFSET --count 1\" reads the record. Bring one back\n" +
			"with \"felix group redrive\", drop it with \"felix group discard\". Example:\n\n" +
			"   felix group dead-letters jobs workers",
		Flags: clientFlags(groupShardFlag()),
		Action: func(c *cli.Context) error {
			return withGroup(c, tk, 2, 2, false, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				offs, err := gc.GroupDeadLetters(ctx, t.ns, t.stream, t.shard, t.group)
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(map[string]any{"stream": t.stream, "group": t.group, "shard": t.shard, "offsets": offs})
				}
				for _, o := range offs {
					if err := p.Line("%d", o); err != nil {
						return err
					}
				}
				return nil
			})
		},
	})
}

// groupOffsetCommand is redrive or discard: one dead letter by offset.
func groupOffsetCommand(tk toolkit, name, usage string) *cli.Command {
	return leaf(&cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "STREAM GROUP OFFSET",
		UsageText: "felix group " + name + " STREAM GROUP OFFSET [--shard N]",
		Description: "redrive puts the dead letter OFFSET back in play (delivered again, attempts from 1);\n" +
			"discard drops it from the list. An offset that is not a dead letter is refused. Example:\n\n" +
			"   felix group " + name + " jobs workers 37",
		Flags: clientFlags(groupShardFlag()),
		Action: func(c *cli.Context) error {
			offs, err := parseOffsets(c, c.Args().Slice()[min(2, c.NArg()):])
			if err != nil {
				return err
			}
			return withGroup(c, tk, 3, 3, false, func(ctx context.Context, gc groupClient, t groupTarget, p printer) error {
				if name == "redrive" {
					return gc.GroupRedrive(ctx, t.ns, t.stream, t.shard, t.group, offs[0])
				}
				return gc.GroupDiscard(ctx, t.ns, t.stream, t.shard, t.group, offs[0])
			})
		},
	})
}

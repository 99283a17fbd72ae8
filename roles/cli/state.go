package cli

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"
)

func stateCommand(tk toolkit) *cli.Command {
	return group(&cli.Command{
		Name:      "state",
		Usage:     "read the state atomic commits wrote (felix commit)",
		UsageText: "felix state get STREAM ENTITY_KEY KEY",
		Description: "The state of a durable stream's shard is the keys felix commit put there, each at the\n" +
			"version (offset) of the commit that wrote it. Example:\n\n" +
			"   felix state get orders order-17 status",
		Subcommands: []*cli.Command{leaf(&cli.Command{
			Name:      "get",
			Usage:     "print a state key's value and version",
			ArgsUsage: "STREAM ENTITY_KEY KEY (or STREAM KEY --shard N)",
			UsageText: "felix state get STREAM ENTITY_KEY KEY [-o json]\nfelix state get STREAM KEY --shard N [-o json]",
			Description: "Reads KEY of the state of the durable STREAM's shard that ENTITY_KEY routes to (or shard\n" +
				"--shard N), as felix commit wrote it. Prints the version (the offset of the commit that wrote\n" +
				"the value) on a line of its own, then the value; -o json: {\"stream\",\"key\",\"found\",\"value\",\n" +
				"\"version\"}. A key never written, or deleted, is not found: it says so on standard error and\n" +
				"exits with code 1 (-o json prints \"found\":false first). A commit is seen once its record is\n" +
				"readable (durable, and on a quorum stream held by a majority).\n\n" +
				"Example:\n\n" +
				"   felix state get orders order-17 status",
			Flags:  clientFlags(&cli.UintFlag{Name: "shard", Usage: "read shard `N` (leave out ENTITY_KEY)"}),
			Action: func(c *cli.Context) error { return runStateGet(c, tk) },
		})},
	})
}

func runStateGet(c *cli.Context, tk toolkit) error {
	if err := needArgs(c, 2, 3); err != nil {
		return err
	}
	t, err := commitTargetOf(c, 1)
	if err != nil {
		return err
	}
	key := c.Args().Get(c.NArg() - 1)
	return runBroker(c, tk, false, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		cc, err := commitsOf(bc)
		if err != nil {
			return err
		}
		var v []byte
		var ver uint64
		var found bool
		if t.onShard {
			v, ver, found, err = cc.StateGetOnShard(ctx, s.Namespace, t.stream, t.shard, key)
		} else {
			v, ver, found, err = cc.StateGet(ctx, s.Namespace, t.stream, t.entityKey, key)
		}
		if err != nil {
			return err
		}
		if p.json {
			m := map[string]any{"stream": t.stream, "key": key, "found": found}
			if found {
				bytesField(m, "value", v)
				m["version"] = ver
			}
			if err := p.JSON(m); err != nil {
				return err
			}
		}
		switch {
		case !found:
			return cli.Exit(fmt.Sprintf("not found: the state of stream %s has no key %q", t.stream, key), exitGeneric)
		case p.json:
			return nil
		}
		if err := p.Line(fmt.Sprint(ver)); err != nil {
			return err
		}
		if _, err := p.w.Write(v); err != nil {
			return err
		}
		return p.Line("")
	})
}

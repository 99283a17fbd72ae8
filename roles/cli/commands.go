package cli

import (
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/internal/buildinfo"
)

// BuildInfo is what the binary was built from (buildinfo.Read).
type BuildInfo = buildinfo.Info

// toolkit is what the commands reach the outside world through; tests
// replace the broker connection with a fake.
type toolkit struct {
	connect connectFunc
}

// Commands returns every client-side command: admin, pub, sub, read,
// offset-for-time, cache, counter, group, commit, state, inspect, version and completion.
func Commands(build BuildInfo) []*cli.Command {
	return commands(build, toolkit{connect: dialBroker})
}

func commands(build BuildInfo, tk toolkit) []*cli.Command {
	return []*cli.Command{
		adminCommand(),
		pubCommand(tk),
		subCommand(tk),
		readCommand(tk),
		offsetForTimeCommand(tk),
		cacheCommand(tk),
		counterCommand(tk),
		commitCommand(tk),
		stateCommand(tk),
		groupCommand(tk),
		inspectCommand(),
		versionCommand(build),
		completionCommand(),
	}
}

// leaf finishes a command that runs an action: flag errors exit with code
// 2, and there is no "help" subcommand, so `felix sub help` subscribes to
// a stream called help instead of printing usage (--help still does).
func leaf(cmd *cli.Command) *cli.Command {
	cmd.HideHelpCommand = true
	cmd.OnUsageError = flagUsageError
	return cmd
}

// group finishes a command that only holds subcommands: without one it
// prints its help, and an unknown one is a usage error.
func group(cmd *cli.Command) *cli.Command {
	cmd.OnUsageError = flagUsageError
	cmd.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return usageErrorf(c, "unknown command %q", c.Args().First())
		}
		return cli.ShowSubcommandHelp(c)
	}
	return cmd
}

// clientFlags are ClientFlags plus -o and extra.
func clientFlags(extra ...cli.Flag) []cli.Flag {
	return append(append(ClientFlags(), OutputFlag()), extra...)
}

// needArgs checks the positional argument count: at least min, and at
// most max unless max is negative.
func needArgs(c *cli.Context, min, max int) error {
	n := c.NArg()
	want := strings.TrimSpace(c.Command.ArgsUsage)
	if want == "" {
		want = "no arguments"
	}
	switch {
	case n < min:
		return usageErrorf(c, "expected %s", want)
	case max >= 0 && n > max:
		return usageErrorf(c, "unexpected argument %q (expected %s)", c.Args().Get(max), want)
	}
	return nil
}

func versionCommand(build BuildInfo) *cli.Command {
	return leaf(&cli.Command{
		Name:      "version",
		Usage:     "print the version, commit and build date",
		UsageText: "felix version [-o json]\nfelix --version",
		Description: "Prints what this binary was built from: the version, commit and date a release build\n" +
			"stamped, else the commit and commit time Go recorded from the git checkout it was built in\n" +
			"(marked modified, +dirty on one line, when it had uncommitted changes), else \"unknown\" (a build with -buildvcs=false).\n" +
			"felix --version prints the same on one line. Example:\n\n" +
			"   felix version -o json",
		Flags: []cli.Flag{OutputFlag()},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			p, err := newPrinter(c)
			if err != nil {
				return err
			}
			return printVersion(p, build)
		},
	})
}

func printVersion(p printer, b BuildInfo) error {
	if p.json {
		return p.JSON(map[string]any{"version": b.Version, "commit": b.Commit, "modified": b.Modified,
			"date": b.Date, "go": runtime.Version()})
	}
	commit := b.Commit
	if b.Modified {
		commit += " (modified)"
	}
	return p.Line("felix %s\ncommit: %s\nbuilt:  %s\ngo:     %s", b.Version, commit, b.Date, runtime.Version())
}

package cli

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/urfave/cli/v2"
)

// ApplyConventions gives every command of app the one convention for
// usage errors, whichever package built the command (serve's roles, the
// bench, the client commands):
//
//   - a bad flag, a missing or extra argument, or an unknown command or
//     subcommand prints one line "error: ..." naming flags with two dashes
//     (--count) and a line pointing at "felix CMD --help", on standard
//     error, and exits with code 2 (exitUsage);
//   - a command that only holds subcommands prints its help when run
//     alone.
//
// It fills only what a command has not set itself.
func ApplyConventions(app *cli.App) {
	app.OnUsageError = flagUsageError
	if app.Action == nil {
		app.Action = groupAction
	}
	for _, cmd := range app.Commands {
		applyToCommand(cmd)
	}
}

func applyToCommand(cmd *cli.Command) {
	if cmd.OnUsageError == nil {
		cmd.OnUsageError = flagUsageError
	}
	if len(cmd.Subcommands) > 0 && cmd.Action == nil {
		cmd.Action = groupAction
	}
	if len(cmd.Subcommands) == 0 {
		// No "help" subcommand on a leaf: `felix sub help` subscribes
		// to a stream called help (--help still prints usage).
		cmd.HideHelpCommand = true
	}
	for _, sub := range cmd.Subcommands {
		applyToCommand(sub)
	}
}

// groupAction is the action of the app and of a command that holds only
// subcommands: alone it prints the help, and an argument that names no
// subcommand is a usage error.
func groupAction(c *cli.Context) error {
	if c.Args().Present() {
		return usageErrorf(c, "unknown command %q", c.Args().First())
	}
	if c.Command == nil || c.Command.Name == "" {
		return cli.ShowAppHelp(c)
	}
	return cli.ShowSubcommandHelp(c)
}

// singleDashFlag matches a long flag name written with one dash, as Go's
// flag package writes them in its errors ("flag provided but not
// defined: -bogus"): after a space or at the start, a dash, then a name
// of two or more characters.
var singleDashFlag = regexp.MustCompile(`(^|\s)-([A-Za-z][A-Za-z0-9-]+)`)

// twoDashes rewrites a flag-parsing message to name long flags the way
// users type them (--count, not -count); one-letter flags keep one dash.
func twoDashes(msg string) string {
	return singleDashFlag.ReplaceAllString(msg, "$1--$2")
}

// flagUsageError turns urfave's flag-parsing errors into a usage error
// (exit code 2) that names flags with two dashes.
func flagUsageError(c *cli.Context, err error, _ bool) error {
	return usageErrorf(c, "%s", twoDashes(err.Error()))
}

// noHelpTopic matches the error urfave's own help command returns, with
// exit code 3, for `felix help X` (or `felix admin help X`) when X names
// no command.
var noHelpTopic = regexp.MustCompile(`^No help topic for '(.*)'$`)

// UsageExit brings the one error ApplyConventions cannot reach, urfave's
// "No help topic" from the help command, under the same convention; every
// other error passes through.
func UsageExit(err error) error {
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 3 {
		return err
	}
	m := noHelpTopic.FindStringSubmatch(ec.Error())
	if m == nil {
		return err
	}
	return cli.Exit(fmt.Sprintf("error: unknown command %q\nrun 'felix --help' for usage", m[1]), exitUsage)
}

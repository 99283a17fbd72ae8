package cli

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// PermuteArgs reorders a command line (args[0] is the program name) so
// that flags may follow positional arguments: urfave/cli stops reading
// flags at the first positional argument, so `felix sub events --count 3`
// would otherwise treat "--count" as a second stream name.
//
// It follows the command names (and aliases) from app.Commands down the
// Subcommands to the command that will run, and moves every flag after
// that point, with its value when the flag takes one and is not written
// --flag=value, ahead of the positional arguments, keeping the relative
// order of each group. Whether a flag takes a value comes from the
// command's flag definitions (unknown flags are taken to have none).
// Everything after "--" is left literal: the "--" is placed after the
// moved flags so urfave ends flag parsing there. Args that name no known
// command come back unchanged.
func PermuteArgs(app *cli.App, args []string) []string {
	if app == nil || len(args) < 2 {
		return args
	}
	cmd, i := findCommand(app, args)
	if cmd == nil {
		return args
	}
	takes := valueFlags(cmd.Flags)
	out := append(make([]string, 0, len(args)), args[:i]...)
	var positional []string
	dashdash := false
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			dashdash = true
			positional = append(positional, args[i+1:]...)
			break
		}
		if !isFlag(a) {
			positional = append(positional, a)
			continue
		}
		out = append(out, a)
		if name, hasValue := flagName(a); !hasValue && takes[name] && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	if dashdash {
		out = append(out, "--")
	}
	return append(out, positional...)
}

// findCommand walks args from the app down through command names; it
// returns the deepest command named and the index just past its name.
// Flags met on the way belong to the commands above and stay in place.
func findCommand(app *cli.App, args []string) (*cli.Command, int) {
	var cmd *cli.Command
	cmds, flags := app.Commands, app.Flags
	at := 0
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if isFlag(a) {
			if name, hasValue := flagName(a); !hasValue && valueFlags(flags)[name] {
				i++
			}
			continue
		}
		next := lookup(cmds, a)
		if next == nil {
			break
		}
		cmd, at = next, i+1
		cmds, flags = next.Subcommands, next.Flags
	}
	return cmd, at
}

func lookup(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// isFlag reports whether a looks like a flag ("-" alone is an argument).
func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

// flagName strips the dashes of a flag and reports whether it carries its
// value inline (--name=value).
func flagName(a string) (name string, hasValue bool) {
	name = strings.TrimLeft(a, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i], true
	}
	return name, false
}

// valueFlags maps every name and alias of the flags that take a value.
func valueFlags(flags []cli.Flag) map[string]bool {
	m := make(map[string]bool)
	for _, f := range flags {
		if !takesValue(f) {
			continue
		}
		for _, n := range f.Names() {
			m[n] = true
		}
	}
	return m
}

func takesValue(f cli.Flag) bool {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		return d.TakesValue()
	}
	_, isBool := f.(*cli.BoolFlag)
	return !isBool
}

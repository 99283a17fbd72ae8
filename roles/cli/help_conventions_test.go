package cli

import (
	"errors"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestUsageExitRewritesNoHelpTopic(t *testing.T) {
	err := UsageExit(cli.Exit("No help topic for 'bogus'", 3))
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != exitUsage ||
		ec.Error() != "error: unknown command \"bogus\"\nrun 'felix --help' for usage" {
		t.Fatalf("got %v", err)
	}
	other := cli.Exit("something else", 3)
	if got := UsageExit(other); got != other {
		t.Fatalf("another exit-3 error changed: %v", got)
	}
	if UsageExit(nil) != nil {
		t.Fatal("nil changed")
	}
}

func TestTwoDashes(t *testing.T) {
	for in, want := range map[string]string{
		"flag provided but not defined: -bogus":    "flag provided but not defined: --bogus",
		`invalid value "-5" for flag -count: bad`:  `invalid value "-5" for flag --count: bad`,
		"flag needs an argument: -o":               "flag needs an argument: -o",
		"flag provided but not defined: --already": "flag provided but not defined: --already",
		"flag needs an argument: -connect-timeout": "flag needs an argument: --connect-timeout",
	} {
		if got := twoDashes(in); got != want {
			t.Errorf("twoDashes(%q) = %q, want %q", in, got, want)
		}
	}
}

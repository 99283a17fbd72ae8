package serve

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	felixcli "github.com/felixmq/felix/roles/cli"
)

var testBuild = BuildInfo{Version: "v1.2.3", Commit: "0123456789abcdef0123", Date: "2026-12-01T00:00:00Z"}

// runApp runs the whole felix app on args the way Main does, and returns
// what it printed, its exit code and the message Main would print.
func runApp(t *testing.T, args ...string) (stdout string, code int, msg string) {
	t.Helper()
	app := App(testBuild)
	var out, errb bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errb
	err := felixcli.UsageExit(app.Run(permuteArgs(app, append([]string{"felix"}, args...))))
	if err == nil {
		return out.String(), 0, ""
	}
	var ec cli.ExitCoder
	if !errors.As(err, &ec) {
		return out.String(), 1, err.Error()
	}
	return out.String(), ec.ExitCode(), ec.Error()
}

// TestOneUsageErrorConvention checks that server roles, client commands,
// groups, the bench and the app itself all answer a usage error the same
// way: exit 2, one "error:" line naming --flags with two dashes, and a
// pointer to the right --help, with no help text dumped.
func TestOneUsageErrorConvention(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		say, cmd string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`, "felix"},
		// Not `felix help bogus` here: urfave's help command is one value
		// shared by every app in the process, and running it links it into
		// itself, which the fish generator then walks for ever. The e2e
		// test runs it in a process of its own; UsageExit has a unit test.
		{[]string{"--bogus"}, "flag provided but not defined: --bogus", "felix"},
		{[]string{"serve", "--bogus"}, "flag provided but not defined: --bogus", "felix serve"},
		{[]string{"controlplane", "--broker-addr", "x"}, "flag provided but not defined: --broker-addr", "felix controlplane"},
		{[]string{"broker", "--controlplane-addr", "x"}, "flag provided but not defined: --controlplane-addr", "felix broker"},
		{[]string{"sub", "events", "--count", "x"}, `invalid value "x" for flag --count`, "felix sub"},
		{[]string{"pub", "--bogus", "s", "m"}, "--bogus", "felix pub"},
		{[]string{"admin", "nope"}, `unknown command "nope"`, "felix admin"},
		{[]string{"admin", "stream", "nope"}, `unknown command "nope"`, "felix admin stream"},
		{[]string{"bench", "nope"}, `unknown command "nope"`, "felix bench"},
		{[]string{"bench", "pubsub", "--bogus"}, "--bogus", "felix bench pubsub"},
		{[]string{"version", "extra"}, `unexpected argument "extra"`, "felix version"},
		{[]string{"completion", "tcsh"}, `unknown shell "tcsh"`, "felix completion"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, code, msg := runApp(t, tc.args...)
			lines := strings.Split(msg, "\n")
			if code != 2 || len(lines) != 2 || !strings.HasPrefix(lines[0], "error: ") || !strings.Contains(lines[0], tc.say) {
				t.Fatalf("exit %d, message %q: want exit 2 and one error line saying %q", code, msg, tc.say)
			}
			if want := "run '" + tc.cmd + " --help' for usage"; lines[1] != want {
				t.Fatalf("second line %q, want %q", lines[1], want)
			}
			if regexp.MustCompile(`(^|\s)-[a-z][a-z-]+`).MatchString(lines[0]) {
				t.Fatalf("%q names a flag with one dash", lines[0])
			}
			if stdout != "" {
				t.Fatalf("a usage error printed to stdout:\n%s", stdout)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	for _, flag := range []string{"--version", "-v"} {
		stdout, code, msg := runApp(t, flag)
		want := "felix version v1.2.3 (commit 0123456789ab, 2026-12-01T00:00:00Z)\n"
		if code != 0 || stdout != want {
			t.Fatalf("%s: exit %d (%s), printed %q, want %q", flag, code, msg, stdout, want)
		}
	}
}

// flagNames lists the long names of a command's flags.
func flagNames(cmd *cli.Command) []string {
	var names []string
	for _, f := range cmd.Flags {
		names = append(names, f.Names()[0])
	}
	return names
}

// TestEachRoleListsOnlyItsFlags checks that a role's help shows only the
// flags that apply to it, each with a placeholder that says what it takes.
func TestEachRoleListsOnlyItsFlags(t *testing.T) {
	app := App(testBuild)
	for _, tc := range []struct {
		role       string
		has, lacks []string
	}{
		{"serve", []string{"data-dir", "broker-addr", "tcp-addr", "peer-addr", "controlplane-addr", "metrics-addr", "host", "shutdown-timeout", "config",
			"raft-node-id", "raft-peers", "raft-data-dir"},
			[]string{"controlplane-url", "token-file"}},
		{"broker", []string{"data-dir", "broker-addr", "tcp-addr", "peer-addr", "metrics-addr", "host", "controlplane-url", "token-file"},
			[]string{"controlplane-addr", "raft-peers"}},
		{"controlplane", []string{"data-dir", "controlplane-addr", "raft-node-id", "raft-peers", "raft-data-dir"},
			[]string{"broker-addr", "tcp-addr", "peer-addr", "metrics-addr", "host", "controlplane-url", "token-file"}},
	} {
		var cmd *cli.Command
		for _, c := range app.Commands {
			if c.Name == tc.role {
				cmd = c
			}
		}
		names := flagNames(cmd)
		for _, n := range tc.has {
			if !slices.Contains(names, n) {
				t.Errorf("felix %s lacks --%s (has %v)", tc.role, n, names)
			}
		}
		for _, n := range tc.lacks {
			if slices.Contains(names, n) {
				t.Errorf("felix %s lists --%s, which does not apply to it", tc.role, n)
			}
		}
		help, code, msg := runApp(t, tc.role, "--help")
		if code != 0 {
			t.Fatalf("felix %s --help: exit %d %s", tc.role, code, msg)
		}
		if m := regexp.MustCompile(`(?m)^\s+--\S+ value\b.*$`).FindString(help); m != "" {
			t.Errorf("felix %s --help has a flag without a placeholder: %s", tc.role, m)
		}
	}
	help, _, _ := runApp(t, "serve", "--help")
	for _, want := range []string{"--broker-addr HOST:PORT", "--controlplane-addr HOST:PORT", "--data-dir DIR"} {
		if !strings.Contains(help, want) {
			t.Errorf("felix serve --help lacks %q:\n%s", want, help)
		}
	}
}

// TestCompletionScripts checks each shell's script: fish's names the
// commands itself; bash's and zsh's ask felix through the completion hook,
// which must list the commands.
func TestCompletionScripts(t *testing.T) {
	cmds := []string{"serve", "pub", "sub", "cache", "admin", "bench", "completion"}
	fish, code, msg := runApp(t, "completion", "fish")
	if code != 0 {
		t.Fatalf("fish: exit %d %s", code, msg)
	}
	for _, c := range append(cmds, "watch-fanout", "offset-for-time") {
		if !strings.Contains(fish, c) {
			t.Errorf("the fish script does not mention %s", c)
		}
	}
	for _, shell := range []string{"bash", "zsh"} {
		script, code, msg := runApp(t, "completion", shell)
		if code != 0 || !strings.Contains(script, "felix") || !strings.Contains(script, "--generate-bash-completion") {
			t.Fatalf("%s: exit %d %s\n%s", shell, code, msg, script)
		}
	}
	// urfave's completion reads os.Args, not the args given to Run.
	complete := func(args ...string) (string, int) {
		saved := os.Args
		defer func() { os.Args = saved }()
		os.Args = append([]string{"felix"}, args...)
		out, code, _ := runApp(t, args...)
		return out, code
	}
	words, code := complete("--generate-bash-completion")
	for _, c := range cmds {
		if code != 0 || !slices.Contains(strings.Fields(words), c) {
			t.Errorf("the completion hook does not offer %s: %q", c, words)
		}
	}
	words, _ = complete("cache", "--generate-bash-completion")
	if !slices.Contains(strings.Fields(words), "watch") {
		t.Errorf("the completion hook does not offer cache's subcommands: %q", words)
	}
}

// TestCompletionRequestsAreNotPermuted: a completion request keeps its
// flag last, so it completes instead of running the command.
func TestCompletionRequestsAreNotPermuted(t *testing.T) {
	app := App(testBuild)
	typed := []string{"felix", "pub", "events", "hello", "--ack", completionFlag}
	if got := permuteArgs(app, typed); !slices.Equal(got, typed) {
		t.Fatalf("permuted to %q", got)
	}
	if got := permuteArgs(app, []string{"felix", "pub", "events", "hello", "--ack"}); got[2] != "--ack" {
		t.Fatalf("an ordinary command line is still permuted: %q", got)
	}
}

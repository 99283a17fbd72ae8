package cli

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestEveryCommandExplainsItself checks that each command documents what it
// does with an example, and that --help prints it.
func TestEveryCommandExplainsItself(t *testing.T) {
	clearEnv(t)
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(append([]string{}, path...), c.Name)
			if c.Usage == "" || c.UsageText == "" || !strings.Contains(c.Description, "   felix ") {
				t.Errorf("%q: Usage, UsageText and a Description with an example are required", p)
			}
			r := run(t, toolkit{}, nil, append(p, "--help")...)
			if r.err != nil || !strings.Contains(r.stdout, c.Usage) || !strings.Contains(r.stdout, "Example") {
				t.Errorf("%q --help: %v\n%s", p, r.err, r.stdout)
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, commands(BuildInfo{}, toolkit{}))
}

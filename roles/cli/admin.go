package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

func adminCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "admin",
		Usage:     "manage tenants, namespaces, streams, caches and tokens through the control plane",
		UsageText: "felix admin tenant|namespace|stream|cache create|list|get|delete ...\nfelix admin token create --sub NAME --perms PERMS [--ttl 24h]\nfelix admin token revoke|unrevoke --sub NAME\nfelix admin token exchange --oidc-token FILE\nfelix admin rbac policy|role ...\nfelix admin oidc set|get\nfelix admin members list\nfelix admin brokers list|deregister\nfelix admin features list|finalize\nfelix admin placement show STREAM|--cache CACHE",
		Description: "Talks to the control plane's REST API (--controlplane, else client.json) with the token\n" +
			"in --token-file. Streams, caches and namespaces live in --tenant (and --namespace).\n" +
			"Examples:\n\n" +
			"   felix admin stream create events --shards 4\n" +
			"   felix admin cache list -o json\n" +
			"   felix admin namespace delete staging --recursive --yes",
		Subcommands: []*cli.Command{
			tenantKind().command(),
			namespaceKind().command(),
			streamKind().command(),
			cacheKind().command(),
			withSigningCommands(withExchangeCommands(withRevocationCommands(tokenCommand()))),
			rbacCommand(),
			oidcCommand(),
			membersCommand(),
			brokersCommand(), featuresCommand(),
			placementCommand(),
		},
	})
}

// resourceKind describes one kind of catalog resource well enough to
// build its create, list, get and delete commands.
type resourceKind[T any] struct {
	name, plural string
	usage        string // one line for the kind's command
	scope        string // where NAME lives, for help text
	header       []string
	row          func(T) []string
	label        func(s Settings, name string) string // full name, e.g. acme/prod/events
	recursive    bool                                 // delete takes --recursive

	createFlags   []cli.Flag
	createOptions string // flags shown in create's usage line
	createExample string
	create        func(c *cli.Context, a *AdminClient, s Settings, name string) (T, error)
	list          func(ctx context.Context, a *AdminClient, s Settings) ([]T, error)
	get           func(ctx context.Context, a *AdminClient, s Settings, name string) (T, error)
	del           func(ctx context.Context, a *AdminClient, s Settings, name string, recursive bool) error
	// more are further subcommands (stream update), listed after the
	// standard four.
	more []*cli.Command
}

func (k resourceKind[T]) command() *cli.Command {
	verbs := "create|list|get|delete"
	for _, m := range k.more {
		verbs += "|" + m.Name
	}
	return group(&cli.Command{
		Name:      k.name,
		Usage:     k.usage,
		UsageText: fmt.Sprintf("felix admin %s %s [NAME]", k.name, verbs),
		Description: fmt.Sprintf("Creates, lists, inspects and deletes %s %s. Example:\n\n   %s\n   felix admin %s list",
			k.plural, k.scope, k.createExample, k.name),
		Subcommands: append([]*cli.Command{k.createCommand(), k.listCommand(), k.getCommand(), k.deleteCommand()}, k.more...),
	})
}

func (k resourceKind[T]) createCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:        "create",
		Usage:       "create a " + k.name,
		ArgsUsage:   "NAME",
		UsageText:   strings.TrimSpace(fmt.Sprintf("felix admin %s create NAME %s", k.name, k.createOptions)),
		Description: fmt.Sprintf("Creates the %s NAME %s. Example:\n\n   %s", k.name, k.scope, k.createExample),
		Flags:       clientFlags(k.createFlags...),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				v, err := k.create(c, a, s, c.Args().First())
				if err != nil {
					return withHint(err, codeConflict, fmt.Sprintf("it already exists; see it with felix admin %s get %s", k.name, c.Args().First()))
				}
				if p.json {
					return p.JSON(v)
				}
				return p.Line("created %s %s", k.name, k.label(s, c.Args().First()))
			})
		},
	})
}

func (k resourceKind[T]) listCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:        "list",
		Aliases:     []string{"ls"},
		Usage:       "list " + k.plural,
		ArgsUsage:   " ",
		UsageText:   fmt.Sprintf("felix admin %s list [-o json]", k.name),
		Description: fmt.Sprintf("Lists the %s %s. Example:\n\n   felix admin %s list -o json", k.plural, k.scope, k.name),
		Flags:       clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				items, err := k.list(c.Context, a, s)
				if err != nil {
					return err
				}
				return k.printList(p, items)
			})
		},
	})
}

func (k resourceKind[T]) printList(p printer, items []T) error {
	if p.json {
		if items == nil {
			items = []T{}
		}
		return p.JSON(items)
	}
	if len(items) == 0 {
		return p.Line("no %s", k.plural)
	}
	rows := make([][]string, len(items))
	for i, it := range items {
		rows[i] = k.row(it)
	}
	return p.Table(k.header, rows)
}

func (k resourceKind[T]) getCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:        "get",
		Usage:       "show one " + k.name,
		ArgsUsage:   "NAME",
		UsageText:   fmt.Sprintf("felix admin %s get NAME [-o json]", k.name),
		Description: fmt.Sprintf("Shows the %s NAME %s. Example:\n\n   felix admin %s get NAME -o json", k.name, k.scope, k.name),
		Flags:       clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				v, err := k.get(c.Context, a, s, c.Args().First())
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(v)
				}
				return p.Table(k.header, [][]string{k.row(v)})
			})
		},
	})
}

func (k resourceKind[T]) deleteCommand() *cli.Command {
	flags := clientFlags(&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "delete without asking"})
	usage := fmt.Sprintf("felix admin %s delete NAME [--yes]", k.name)
	what := ""
	if k.recursive {
		flags = append(flags, &cli.BoolFlag{Name: "recursive", Aliases: []string{"r"},
			Usage: "also delete everything it holds"})
		usage = fmt.Sprintf("felix admin %s delete NAME [--recursive] [--yes]", k.name)
		what = "\nWithout --recursive a " + k.name + " that still holds anything is refused."
	}
	return leaf(&cli.Command{
		Name:        "delete",
		Aliases:     []string{"rm"},
		Usage:       "delete a " + k.name,
		ArgsUsage:   "NAME",
		UsageText:   usage,
		Description: fmt.Sprintf("Deletes the %s NAME %s.%s\nOn a terminal it asks first; otherwise --yes is required. Example:\n\n   felix admin %s delete NAME --yes", k.name, k.scope, what, k.name),
		Flags:       flags,
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				name := c.Args().First()
				label := k.name + " " + k.label(s, name)
				if err := confirm(c, label); err != nil {
					return err
				}
				if err := k.del(c.Context, a, s, name, c.Bool("recursive")); err != nil {
					if k.recursive {
						err = withHint(err, codeConflict, "it still holds resources; pass --recursive to delete them as well")
					}
					return err
				}
				if p.json {
					return p.JSON(map[string]string{"deleted": k.name, "name": k.label(s, name)})
				}
				return p.Line("deleted %s", label)
			})
		},
	})
}

// withAdmin resolves the settings, builds the admin client and runs fn,
// rendering any failure for the user.
func withAdmin(c *cli.Context, fn func(*AdminClient, Settings, printer) error) error {
	p, s, err := clientSetup(c)
	if err != nil {
		return err
	}
	a, err := NewAdminClient(s)
	if err != nil {
		return exitError(err)
	}
	defer a.Close()
	return exitError(fn(a, s, p))
}

// confirm asks before deleting what. --yes skips the question; without
// it, standard input must be a terminal to answer.
func confirm(c *cli.Context, what string) error {
	return confirmTo(c, "delete "+what)
}

// confirmTo asks before doing act ("delete stream x"). --yes skips the
// question; without it, standard input must be a terminal to answer.
func confirmTo(c *cli.Context, act string) error {
	if c.Bool("yes") {
		return nil
	}
	if !isTerminal(c.App.Reader) {
		return usageErrorf(c, "refusing to %s without --yes (standard input is not a terminal)", act)
	}
	fmt.Fprintf(c.App.ErrWriter, "%s? [y/N] ", act)
	line, _ := bufio.NewReader(io.LimitReader(c.App.Reader, 256)).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return cli.Exit("aborted", exitGeneric)
}

// isTerminal reports whether r is a terminal. A character device is not
// enough (/dev/null is one): the terminal ioctl must answer.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios)
	return err == nil
}

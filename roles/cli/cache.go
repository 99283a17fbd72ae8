package cli

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"
)

func cacheCommand(tk toolkit) *cli.Command {
	return group(&cli.Command{
		Name:      "cache",
		Usage:     "put, get, delete and watch keys of a cache",
		UsageText: "felix cache put|get|delete|watch CACHE KEY [VALUE]",
		Description: "Reads and writes keys of a cache in the current tenant and namespace (create the cache\n" +
			"first with felix admin cache create). Example:\n\n" +
			"   felix cache put sessions user-1 '{\"cart\":3}' --ttl 30m\n" +
			"   felix cache get sessions user-1\n" +
			"   felix cache watch sessions user-1",
		Subcommands: []*cli.Command{cachePutCommand(tk), cacheGetCommand(tk), cacheDeleteCommand(tk), cacheWatchCommand(tk), cacheKeysCommand(tk)},
	})
}

func cachePutCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "put",
		Usage:     "set a key's value",
		ArgsUsage: "CACHE KEY VALUE",
		UsageText: "felix cache put CACHE KEY VALUE [--ttl 30s] [--if-absent | --if-version N] [-o json]",
		Description: "Stores VALUE under KEY; --ttl makes it expire. Prints nothing in text; -o json prints\n" +
			"{\"cache\",\"key\",\"stored\":true,\"ttl\"} (ttl only when given).\n\n" +
			"--if-absent stores only if the key has no live value (a lease, an idempotency key);\n" +
			"--if-version N only if its value is at version N (read-modify-write). " + condHelp + "\n" +
			"Examples:\n\n" +
			"   felix cache put sessions user-1 online --ttl 30s\n" +
			"   felix cache put leases endpoint-7 me --ttl 30s --if-absent\n" +
			"   felix cache put config endpoints \"$NEW\" --if-version 1764612000000000042",
		Flags: clientFlags(&cli.DurationFlag{Name: "ttl", Usage: "expire the value after `DURATION`", DefaultText: "never"},
			&cli.BoolFlag{Name: flagIfAbsent, Usage: "store only if the key has no live value"},
			ifVersionFlag("store")),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 3, 3); err != nil {
				return err
			}
			if c.Duration("ttl") < 0 {
				return usageErrorf(c, "--ttl must not be negative")
			}
			if c.Bool(flagIfAbsent) && c.IsSet(flagIfVersion) {
				return usageErrorf(c, "--if-absent and --if-version are exclusive")
			}
			return withCache(c, tk, func(bc brokerClient, s Settings, p printer) error {
				if c.Bool(flagIfAbsent) || c.IsSet(flagIfVersion) {
					return cachePutIf(c, bc, s, p)
				}
				a := c.Args()
				if err := bc.CachePut(c.Context, s.Namespace, a.Get(0), a.Get(1), []byte(a.Get(2)), c.Duration("ttl")); err != nil {
					return err
				}
				if !p.json {
					return nil
				}
				doc := map[string]any{"cache": a.Get(0), "key": a.Get(1), "stored": true}
				if ttl := c.Duration("ttl"); ttl > 0 {
					doc["ttl"] = ttl.String()
				}
				return p.JSON(doc)
			})
		},
	})
}

func cacheGetCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "get",
		Usage:     "print a key's value",
		ArgsUsage: "CACHE KEY",
		UsageText: "felix cache get CACHE KEY [--versioned] [-o json]",
		Description: "Prints the value stored under KEY (-o json: {\"cache\",\"key\",\"found\",\"value\"}, with\n" +
			"value_base64 instead for binary values). " + missingKeyHelp + "\n\n" +
			"--versioned prints the value's version (the offset of the put that wrote it) on a line of its\n" +
			"own before the value, and adds \"version\" to -o json: what --if-version takes.\n" +
			"Examples:\n\n" +
			"   felix cache get sessions user-1\n" +
			"   felix cache get config endpoints --versioned",
		Flags: clientFlags(&cli.BoolFlag{Name: flagVersioned, Usage: "print the value's version too"}),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 2, 2); err != nil {
				return err
			}
			return withCache(c, tk, func(bc brokerClient, s Settings, p printer) error {
				if c.Bool(flagVersioned) {
					return cacheGetVersioned(c, bc, s, p)
				}
				cache, key := c.Args().Get(0), c.Args().Get(1)
				v, ok, err := bc.CacheGet(c.Context, s.Namespace, cache, key)
				if err != nil {
					return err
				}
				return printValue(p, cache, key, v, ok)
			})
		},
	})
}

func cacheDeleteCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "delete",
		Aliases:   []string{"del", "rm"},
		Usage:     "remove a key and print the value it held",
		ArgsUsage: "CACHE KEY",
		UsageText: "felix cache delete CACHE KEY [--if-version N] [-o json]",
		Description: "Removes KEY and prints the value it held (-o json as for get). " + missingKeyHelp + "\n\n" +
			"--if-version N removes it only if its value is at version N, and prints nothing when it\n" +
			"does (-o json: {\"cache\",\"key\",\"applied\":true}). " + condHelp + "\n" +
			"Examples:\n\n   felix cache delete sessions user-1\n" +
			"   felix cache delete leases endpoint-7 --if-version 1764612000000000042",
		Flags: clientFlags(ifVersionFlag("remove")),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 2, 2); err != nil {
				return err
			}
			return withCache(c, tk, func(bc brokerClient, s Settings, p printer) error {
				if c.IsSet(flagIfVersion) {
					return cacheDeleteIf(c, bc, s, p)
				}
				cache, key := c.Args().Get(0), c.Args().Get(1)
				v, ok, err := bc.CacheDelete(c.Context, s.Namespace, cache, key)
				if err != nil {
					return err
				}
				return printValue(p, cache, key, v, ok)
			})
		},
	})
}

// withCache runs fn with a connected client, the settings and a printer.
func withCache(c *cli.Context, tk toolkit, fn func(brokerClient, Settings, printer) error) error {
	return runBroker(c, tk, false, func(_ context.Context, bc brokerClient, s Settings, p printer) error {
		return fn(bc, s, p)
	})
}

// missingKeyHelp is what get and delete say in --help about a key that
// is not there.
const missingKeyHelp = "A key that is not there (never set,\n" +
	"deleted or expired) prints \"not found\" on standard error and exits with code 1; with -o json\n" +
	"standard output still gets {\"cache\",\"key\",\"found\":false}."

// printValue prints a cache value: the raw value in text, or
// {"cache","key","found","value"} in JSON. A key that is not there is
// exit code 1 with "not found" on standard error, after the JSON document
// when -o json asked for one, the same for every command that looks a
// key up.
func printValue(p printer, cache, key string, v []byte, found bool) error {
	if p.json {
		m := map[string]any{"cache": cache, "key": key, "found": found}
		if found {
			bytesField(m, "value", v)
		}
		if err := p.JSON(m); err != nil {
			return err
		}
	}
	if !found {
		return notFound(cache, key)
	}
	if p.json {
		return nil
	}
	if _, err := p.w.Write(v); err != nil {
		return err
	}
	return p.Line("")
}

// notFound is the exit of a command that looked up a key not there.
func notFound(cache, key string) error {
	return cli.Exit(fmt.Sprintf("not found: cache %s has no key %q", cache, key), exitGeneric)
}

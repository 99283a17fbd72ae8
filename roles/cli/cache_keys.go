package cli

import (
	"context"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// cacheKeysCommand is felix cache keys: one bounded page of a cache's
// keys at a time, with a cursor for the next.
func cacheKeysCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "keys",
		Usage:     "list a cache's keys, a page at a time",
		ArgsUsage: "CACHE",
		UsageText: "felix cache keys CACHE [--prefix P] [--limit N] [--after KEY | --all] [-o json]",
		Description: "Lists the keys of CACHE in byte order, those starting with --prefix, at most --limit of them\n" +
			"(1 to 1000). When more remain it says so on standard error with the --after to pass for the\n" +
			"next page (-o json: {\"keys\": [...], \"next\": KEY}). --all follows the pages to the end.\n" +
			"Needs cache.read over every key under the prefix. Examples:\n\n" +
			"   felix cache keys sessions --prefix user:\n" +
			"   felix cache keys sessions --limit 500 --after user:0420",
		Flags: clientFlags(
			&cli.StringFlag{Name: "prefix", Usage: "only keys starting with `P`"},
			&cli.IntFlag{Name: "limit", Usage: "at most `N` keys a page (1..1000)", Value: 100},
			&cli.StringFlag{Name: "after", Usage: "start after `KEY` (the cursor a previous page printed)"},
			&cli.BoolFlag{Name: "all", Usage: "follow every page (bounded pages, unbounded output)"},
		),
		Action: func(c *cli.Context) error { return runCacheKeys(c, tk) },
	})
}

func runCacheKeys(c *cli.Context, tk toolkit) error {
	if err := needArgs(c, 1, 1); err != nil {
		return err
	}
	limit := c.Int("limit")
	if limit < 1 || limit > 1000 {
		return usageErrorf(c, "--limit %d: want 1 to 1000", limit)
	}
	if c.Bool("all") && c.IsSet("after") {
		return usageErrorf(c, "--all and --after do not go together")
	}
	cache, prefix, after := c.Args().First(), c.String("prefix"), c.String("after")
	return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		fc, err := sdkClientOf(bc)
		if err != nil {
			return err
		}
		var keys []string
		for {
			page, err := retryPatiently(ctx, func() (*felix.CacheKeysPage, error) {
				return fc.CacheKeys(ctx, s.Namespace, cache, prefix, after, limit)
			})
			if err != nil {
				return err
			}
			if !p.json {
				for _, k := range page.Keys {
					if err := p.Line("%s", k); err != nil {
						return err
					}
				}
			} else {
				keys = append(keys, page.Keys...)
			}
			if !page.More {
				if p.json {
					return p.JSON(map[string]any{"keys": nonNil(keys)})
				}
				return nil
			}
			if !c.Bool("all") {
				if p.json {
					return p.JSON(map[string]any{"keys": nonNil(keys), "next": page.Next})
				}
				c.App.ErrWriter.Write([]byte("more keys: next page with --after " + quoteArg(page.Next) + "\n"))
				return nil
			}
			after = page.Next
		}
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// quoteArg quotes s for a POSIX shell when it holds anything but plain
// characters.
func quoteArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

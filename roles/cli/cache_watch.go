package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// cacheWatcher is the part of *felix.CacheWatch the commands use.
type cacheWatcher interface {
	Next(ctx context.Context) (felix.CacheWatchItem, error)
	ResumeOffset() uint64
	Resnapshot() bool
	Close() error
}

func (c sdkClient) WatchCache(ctx context.Context, namespace, cache string, f felix.CacheWatchFilter, opts ...felix.WatchOption) (cacheWatcher, error) {
	w, err := c.Client.WatchCache(ctx, namespace, cache, f, opts...)
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (c patientClient) WatchCache(ctx context.Context, ns, cache string, f felix.CacheWatchFilter, opts ...felix.WatchOption) (cacheWatcher, error) {
	return retryPatiently(ctx, func() (cacheWatcher, error) { return c.brokerClient.WatchCache(ctx, ns, cache, f, opts...) })
}

func cacheWatchCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "watch",
		Usage:     "print every change to a key, or to every key with a prefix",
		ArgsUsage: "CACHE KEY",
		UsageText: "felix cache watch CACHE KEY [--prefix] [--from OFFSET | --retained] [--count N] [-o json]\n" +
			"   felix cache watch --cache CACHE KEY ...",
		Description: "Prints one line per change to KEY of CACHE (with --prefix, to every key starting with KEY;\n" +
			"an empty KEY with --prefix is the whole cache): the change's offset, its op (put, delete or\n" +
			"expire), the key and, for a put, the value. With -o json each line is one JSON object:\n" +
			"{\"offset\", \"op\", \"key\", \"value\" (or value_base64), \"expires_at\"}; retained values carry\n" +
			"\"retained\": true and the end of them is {\"state_complete\": true, \"offset\", \"count\"}.\n" +
			"Where the watch began, and the offset to resume from when it stops, are printed on\n" +
			"standard error. --retained starts with the current values; --from resumes at an offset\n" +
			"(an older one than the broker keeps starts with the current values instead, and says so).\n" +
			"If the watch falls behind and the broker ends it, the command prints the offset to resume\n" +
			"from and exits with code 1. Runs until --count changes were printed or Ctrl-C.\n" +
			"Examples:\n\n" +
			"   felix cache watch sessions user-1\n" +
			"   felix cache watch sessions user- --prefix --retained -o json\n" +
			"   felix cache watch --cache sessions user-1 --from 1718000000000000123 --count 10",
		Flags: clientFlags(
			&cli.StringFlag{Name: "cache", Usage: "the `CACHE` to watch (instead of the first argument)"},
			&cli.BoolFlag{Name: "prefix", Usage: "watch every key that starts with KEY"},
			&cli.StringFlag{Name: "from", Usage: "resume at `OFFSET`: print every change at or after it", DefaultText: "new changes only"},
			&cli.BoolFlag{Name: "retained", Usage: "print the current values first"},
			&cli.UintFlag{Name: "count", Usage: "exit after `N` changes", DefaultText: "run until interrupted"},
		),
		Action: func(c *cli.Context) error { return runCacheWatch(c, tk) },
	})
}

// watchArgs reads CACHE and KEY from the arguments and --cache.
func watchArgs(c *cli.Context) (cache string, f felix.CacheWatchFilter, err error) {
	args := c.Args().Slice()
	if cache = c.String("cache"); cache == "" {
		if len(args) == 0 {
			return "", f, usageErrorf(c, "expected CACHE KEY")
		}
		cache, args = args[0], args[1:]
	}
	prefix := c.Bool("prefix")
	switch {
	case len(args) > 1:
		return "", f, usageErrorf(c, "unexpected argument %q (expected CACHE KEY)", args[1])
	case len(args) == 0 && !prefix:
		return "", f, usageErrorf(c, "expected a KEY (or --prefix to watch the whole cache)")
	case len(args) == 0:
		return cache, felix.WatchPrefix(""), nil
	case prefix:
		return cache, felix.WatchPrefix(args[0]), nil
	}
	return cache, felix.WatchKey(args[0]), nil
}

// watchOptions reads --from and --retained.
func watchOptions(c *cli.Context) ([]felix.WatchOption, error) {
	var opts []felix.WatchOption
	if from := c.String("from"); from != "" {
		n, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			return nil, usageErrorf(c, "--from %q: want an offset", from)
		}
		opts = append(opts, felix.WatchFrom(n))
	}
	if c.Bool("retained") {
		if len(opts) > 0 {
			return nil, usageErrorf(c, "--from and --retained are mutually exclusive")
		}
		opts = append(opts, felix.WatchRetained())
	}
	return opts, nil
}

func runCacheWatch(c *cli.Context, tk toolkit) error {
	cache, filter, err := watchArgs(c)
	if err != nil {
		return err
	}
	opts, err := watchOptions(c)
	if err != nil {
		return err
	}
	return runBroker(c, tk, true, func(ctx context.Context, bc brokerClient, s Settings, p printer) error {
		w, err := bc.WatchCache(ctx, s.Namespace, cache, filter, opts...)
		if err != nil {
			return err
		}
		defer w.Close()
		fmt.Fprintf(c.App.ErrWriter, "watching from offset %d\n", w.ResumeOffset())
		if w.Resnapshot() {
			fmt.Fprintln(c.App.ErrWriter, "the offset is older than the broker's history: starting with the current values")
		}
		return lagHint(printWatch(ctx, w, p, c.App.ErrWriter, uint64(c.Uint("count"))))
	})
}

// printWatch prints items until count changes (0: no limit) were printed
// or ctx ends, a clean exit that reports where to resume.
func printWatch(ctx context.Context, w cacheWatcher, p printer, errw io.Writer, count uint64) error {
	out := bufio.NewWriter(p.w)
	defer out.Flush()
	p.w = out
	for printed := uint64(0); count == 0 || printed < count; {
		it, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(errw, "stopped; resume with --from %d\n", w.ResumeOffset())
				return nil
			}
			return err
		}
		if err := printWatchItem(p, it); err != nil {
			return err
		}
		if !it.Retained && !it.StateComplete {
			printed++
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func printWatchItem(p printer, it felix.CacheWatchItem) error {
	if p.json {
		return p.JSON(watchItemJSON(it))
	}
	switch {
	case it.StateComplete:
		return p.Line("%d state-complete %d", it.Offset, it.Count)
	case it.Value != nil:
		_, err := fmt.Fprintf(p.w, "%d %s %s ", it.Offset, watchOpText(it), it.Key)
		if err != nil {
			return err
		}
		return printPayload(p, it.Value)
	}
	return p.Line("%d %s %s", it.Offset, watchOpText(it), it.Key)
}

func watchOpText(it felix.CacheWatchItem) string {
	if it.Retained {
		return "retained"
	}
	return it.Op
}

// watchItemJSON is the JSON shape of one watch item.
func watchItemJSON(it felix.CacheWatchItem) map[string]any {
	m := map[string]any{"offset": it.Offset}
	if it.StateComplete {
		m["state_complete"], m["count"] = true, it.Count
		return m
	}
	m["op"], m["key"] = it.Op, it.Key
	if it.Value != nil {
		bytesField(m, "value", it.Value)
	}
	if !it.ExpiresAt.IsZero() {
		m["expires_at"] = it.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	if it.Retained {
		m["retained"] = true
	}
	return m
}

// lagHint explains a watch the broker ended because it fell behind.
func lagHint(err error) error {
	var lagged *felix.CacheWatchLagged
	if !errors.As(err, &lagged) {
		return err
	}
	return cli.Exit(fmt.Sprintf("error: the watch fell behind and the broker ended it; resume with --from %d",
		lagged.ResumeFrom), exitGeneric)
}

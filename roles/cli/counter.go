package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"
)

// counterCommand is `felix counter add|get`: counters of a cache
// (FEATURE_COUNTERS, brokers with durable storage only).
func counterCommand(tk toolkit) *cli.Command {
	return group(&cli.Command{
		Name:      "counter",
		Usage:     "add to and read counters of a cache",
		UsageText: "felix counter add|get CACHE KEY [DELTA]",
		Description: "Counters are signed 64-bit sums kept beside a cache's values, under the cache's keys, in\n" +
			"the current tenant and namespace. They need a broker with durable storage (felix serve\n" +
			"has one). Example:\n\n" +
			"   felix counter add limits user-42 1\n" +
			"   felix counter get limits user-42",
		Subcommands: []*cli.Command{counterAddCommand(tk), counterGetCommand(tk)},
	})
}

func counterAddCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "add",
		Usage:     "add a signed delta to a counter and print the new sum",
		ArgsUsage: "CACHE KEY DELTA",
		UsageText: "felix counter add CACHE KEY DELTA [-o json]\n   felix counter add CACHE KEY -- -DELTA",
		Description: "Adds DELTA (a signed 64-bit integer) to the counter KEY of CACHE and prints the sum\n" +
			"including it (-o json: {\"cache\",\"key\",\"sum\"}). Write a negative DELTA after \"--\" so it\n" +
			"is not read as a flag. A sum that would overflow is refused and adds nothing.\n\n" +
			"At-least-once: when the answer is lost the add may have been applied; the command says so,\n" +
			"exits with code 1 and does not send it again (sending it again may count it twice).\n" +
			"Examples:\n\n" +
			"   felix counter add limits user-42 1\n" +
			"   felix counter add stock sku-7 -- -3",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 3, 3); err != nil {
				return err
			}
			a := c.Args()
			delta, err := strconv.ParseInt(a.Get(2), 10, 64)
			if err != nil {
				return usageErrorf(c, "DELTA %q is not a signed 64-bit integer", a.Get(2))
			}
			return withCache(c, tk, func(bc brokerClient, s Settings, p printer) error {
				sum, err := bc.CounterAdd(c.Context, s.Namespace, a.Get(0), a.Get(1), delta)
				if err != nil {
					return err
				}
				return printSum(p, a.Get(0), a.Get(1), sum, true)
			})
		},
	})
}

func counterGetCommand(tk toolkit) *cli.Command {
	return leaf(&cli.Command{
		Name:      "get",
		Usage:     "print a counter's sum",
		ArgsUsage: "CACHE KEY",
		UsageText: "felix counter get CACHE KEY [-o json]",
		Description: "Prints the sum of the counter KEY of CACHE (-o json: {\"cache\",\"key\",\"found\",\"sum\"}).\n" +
			"A counter never written is not a sum of 0: it prints \"never written\" on standard error and\n" +
			"exits with code 1 (with -o json, standard output still gets \"found\":false).\n" +
			"Example:\n\n   felix counter get limits user-42",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 2, 2); err != nil {
				return err
			}
			cache, key := c.Args().Get(0), c.Args().Get(1)
			return withCache(c, tk, func(bc brokerClient, s Settings, p printer) error {
				sum, ok, err := bc.CounterGet(c.Context, s.Namespace, cache, key)
				if err != nil {
					return err
				}
				return printSum(p, cache, key, sum, ok)
			})
		},
	})
}

// printSum prints a counter's sum, or says it was never written (exit
// code 1, after the JSON document when -o json asked for one).
func printSum(p printer, cache, key string, sum int64, found bool) error {
	if p.json {
		m := map[string]any{"cache": cache, "key": key, "found": found}
		if found {
			m["sum"] = sum
		}
		if err := p.JSON(m); err != nil {
			return err
		}
	}
	if !found {
		return cli.Exit(fmt.Sprintf("never written: cache %s has no counter %q", cache, key), exitGeneric)
	}
	if p.json {
		return nil
	}
	return p.Line(strconv.FormatInt(sum, 10))
}

// Counter adds are waited out like conditional writes: a refusal of
// class retry or retry_after promises nothing was applied, and an add
// that may have been applied is never sent again (waitOut).
func (c patientClient) CounterAdd(ctx context.Context, ns, cache, key string, delta int64) (int64, error) {
	return retryPatiently(ctx, func() (int64, error) { return c.brokerClient.CounterAdd(ctx, ns, cache, key, delta) })
}

func (c patientClient) CounterGet(ctx context.Context, ns, cache, key string) (int64, bool, error) {
	type got struct {
		sum int64
		ok  bool
	}
	g, err := retryPatiently(ctx, func() (got, error) {
		sum, ok, err := c.brokerClient.CounterGet(ctx, ns, cache, key)
		return got{sum, ok}, err
	})
	return g.sum, g.ok, err
}

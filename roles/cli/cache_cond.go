package cli

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// exitConditionRefused is the exit status of a conditional put or delete
// whose condition did not hold: the broker answered and wrote nothing.
const exitConditionRefused = 3

// Flags of the conditional cache commands.
const (
	flagIfAbsent  = "if-absent"
	flagIfVersion = "if-version"
	flagVersioned = "versioned"
)

// condHelp is what put and delete say in --help about conditions.
const condHelp = "A version is the offset of the put that wrote a value (felix cache get --versioned prints it).\n" +
	"With a condition the write is made only if it holds when the broker checks it, atomically on the\n" +
	"key: it prints the version written (-o json: {\"cache\",\"key\",\"applied\":true,\"version\"}).\n" +
	"A condition that does not hold writes nothing, prints \"refused\" with the key's current version\n" +
	"on standard error and exits with code 3 (-o json: \"applied\":false and the version, left out\n" +
	"when the key is absent). A conditional write whose answer was lost is never sent again: the\n" +
	"error says the outcome is unknown; read the key to find out."

func ifVersionFlag(what string) *cli.Uint64Flag {
	return &cli.Uint64Flag{Name: flagIfVersion, Usage: what + " only if the key is at version `N`"}
}

// cachePutIf runs a put with --if-absent or --if-version.
func cachePutIf(c *cli.Context, bc brokerClient, s Settings, p printer) error {
	a := c.Args()
	cond := felix.IfAbsent()
	if c.IsSet(flagIfVersion) {
		cond = felix.IfVersion(c.Uint64(flagIfVersion))
	}
	r, err := bc.CachePutIf(c.Context, s.Namespace, a.Get(0), a.Get(1), []byte(a.Get(2)), c.Duration("ttl"), cond)
	if err != nil {
		return err
	}
	return printCondResult(p, a.Get(0), a.Get(1), r)
}

// cacheDeleteIf runs a delete with --if-version.
func cacheDeleteIf(c *cli.Context, bc brokerClient, s Settings, p printer) error {
	cache, key := c.Args().Get(0), c.Args().Get(1)
	r, err := bc.CacheDeleteIf(c.Context, s.Namespace, cache, key, c.Uint64(flagIfVersion))
	if err != nil {
		return err
	}
	return printCondResult(p, cache, key, r)
}

// printCondResult prints a conditional write's answer: the version written
// (none after a delete) in text, or {"cache","key","applied","version"} in
// JSON; a refusal is exit code 3 with the key's current version on
// standard error, after the JSON document when -o json asked for one.
func printCondResult(p printer, cache, key string, r felix.CondResult) error {
	if p.json {
		m := map[string]any{"cache": cache, "key": key, "applied": r.Applied}
		if r.HasVersion {
			m["version"] = r.Version
		}
		if err := p.JSON(m); err != nil {
			return err
		}
	}
	if !r.Applied {
		at := "is absent"
		if r.HasVersion {
			at = fmt.Sprintf("is at version %d", r.Version)
		}
		return cli.Exit(fmt.Sprintf("refused: key %q of cache %s %s", key, cache, at), exitConditionRefused)
	}
	if p.json || !r.HasVersion {
		return nil
	}
	return p.Line(fmt.Sprint(r.Version))
}

// cacheGetVersioned runs get --versioned: the version on a line of its
// own, then the value, in text; "version" added to get's JSON.
func cacheGetVersioned(c *cli.Context, bc brokerClient, s Settings, p printer) error {
	cache, key := c.Args().Get(0), c.Args().Get(1)
	v, ver, found, err := bc.CacheGetVersioned(c.Context, s.Namespace, cache, key)
	if err != nil {
		return err
	}
	if p.json {
		m := map[string]any{"cache": cache, "key": key, "found": found}
		if found {
			bytesField(m, "value", v)
			m["version"] = ver
		}
		if err := p.JSON(m); err != nil {
			return err
		}
	}
	switch {
	case !found:
		return notFound(cache, key)
	case p.json:
		return nil
	}
	if err := p.Line(fmt.Sprint(ver)); err != nil {
		return err
	}
	if _, err := p.w.Write(v); err != nil {
		return err
	}
	return p.Line("")
}

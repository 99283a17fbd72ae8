package cli

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

const defaultTokenTTL = 24 * time.Hour

func tokenCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "token",
		Usage:     "mint tokens for a tenant",
		UsageText: "felix admin token create --sub NAME --perms PERMS [--ttl 24h] [--tenant T]",
		Description: "Asks the control plane to sign a token for --tenant. Example:\n\n" +
			"   felix admin token create --sub worker --perms 'stream.publish:stream:default/default/*' > worker.token",
		Subcommands: []*cli.Command{tokenCreateCommand()},
	})
}

func tokenCreateCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "create",
		Usage:     "mint a token and print it",
		ArgsUsage: " ",
		UsageText: "felix admin token create --sub NAME --perms PERMS [--ttl 24h] [--tenant T] [-o json]",
		Description: "Mints a token for subject --sub in --tenant holding the permissions in --perms\n" +
			"(comma-separated or repeated; each is ACTION:RESOURCE, e.g. stream.publish:stream:acme/prod/*,\n" +
			"cache.read:cache:acme/prod/sessions, or *:* for everything). Prints the token, or\n" +
			"{\"token\", \"expires_at\"} with -o json. Example:\n\n" +
			"   felix admin token create --sub reader --perms 'stream.subscribe:stream:default/default/*' --ttl 1h",
		Flags: clientFlags(
			&cli.StringFlag{Name: "sub", Usage: "subject `NAME` the token speaks for"},
			&cli.StringSliceFlag{Name: "perms", Usage: "`PERMS`: ACTION:RESOURCE patterns, comma-separated"},
			&cli.DurationFlag{Name: "ttl", Value: defaultTokenTTL, Usage: "how long the token is valid (`DURATION`)"},
		),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			if c.String("sub") == "" {
				return usageErrorf(c, "--sub is required")
			}
			req := TokenRequest{Subject: c.String("sub"), Perms: splitPerms(c.StringSlice("perms"))}
			if len(req.Perms) == 0 {
				return usageErrorf(c, "--perms is required")
			}
			if c.Duration("ttl") <= 0 {
				return usageErrorf(c, "--ttl must be positive")
			}
			req.TTLSeconds = ttlSeconds(c.Duration("ttl"))
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				tok, err := a.CreateToken(c.Context, s.Tenant, req)
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(tok)
				}
				return p.Line("%s", tok.Token)
			})
		},
	})
}

// splitPerms trims the permissions and drops empty ones (urfave already
// split comma-separated values).
func splitPerms(in []string) []string {
	var out []string
	for _, v := range in {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

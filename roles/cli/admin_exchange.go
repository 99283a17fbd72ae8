package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// maxCredentialFile bounds an OIDC or refresh token file.
const maxCredentialFile = 64 << 10

// ExchangeRequest is the body of a token exchange: absent actions or
// resources mean everything the principal's roles grant.
type ExchangeRequest struct {
	Actions    []string `json:"actions,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	TTLSeconds int64    `json:"ttl_seconds,omitempty"`
}

// ExchangeResponse is a Felix token and the refresh token of its chain.
type ExchangeResponse struct {
	Token            string   `json:"token"`
	ExpiresAt        string   `json:"expires_at"`
	RefreshToken     string   `json:"refresh_token"`
	RefreshExpiresAt string   `json:"refresh_expires_at"`
	Subject          string   `json:"subject"`
	Permissions      []string `json:"permissions"`
}

// Exchange trades the client's bearer credential, an upstream OIDC token,
// for a Felix token of tenant.
func (a *AdminClient) Exchange(ctx context.Context, tenant string, r ExchangeRequest) (ExchangeResponse, error) {
	var out ExchangeResponse
	err := a.do(ctx, http.MethodPost, apiPath("tenants", tenant, "token", "exchange"), nil, r, &out)
	return out, err
}

// Refresh trades a refresh token for a new Felix token and the next
// refresh token of the chain.
func (a *AdminClient) Refresh(ctx context.Context, tenant, refreshToken string) (ExchangeResponse, error) {
	var out ExchangeResponse
	err := a.do(ctx, http.MethodPost, apiPath("tenants", tenant, "token", "refresh"), nil, map[string]string{"refresh_token": refreshToken}, &out)
	return out, err
}

// withExchangeCommands adds exchange and refresh to the token command.
func withExchangeCommands(token *cli.Command) *cli.Command {
	token.Subcommands = append(token.Subcommands, exchangeCommand(), refreshCommand())
	token.UsageText += "\nfelix admin token exchange --oidc-token FILE [--actions A,..] [--resources R,..] [--ttl 1h]\nfelix admin token refresh --refresh-token FILE"
	return token
}

func exchangeCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "exchange",
		Usage:     "trade an OIDC token for a Felix token",
		ArgsUsage: " ",
		UsageText: "felix admin token exchange --oidc-token FILE [--actions A,..] [--resources R,..] [--ttl 1h] [--refresh-out FILE] [--tenant T] [-o json]",
		Description: "Sends the upstream OIDC token in FILE ('-' for standard input) to the control plane, which\n" +
			"checks it against --tenant's issuer and answers a Felix token holding what the principal's\n" +
			"roles grant, narrowed to --actions and --resources when given. Needs no Felix token. Prints\n" +
			"the token (all of the answer with -o json); --refresh-out saves the refresh token. Example:\n\n" +
			"   felix admin token exchange --oidc-token id.jwt --actions stream.subscribe > felix.token",
		Flags: clientFlags(
			&cli.StringFlag{Name: "oidc-token", Usage: "`FILE` holding the OIDC token ('-': standard input)"},
			&cli.StringSliceFlag{Name: "actions", Usage: "narrow to these `ACTIONS`"},
			&cli.StringSliceFlag{Name: "resources", Usage: "narrow to these `RESOURCES` patterns"},
			&cli.DurationFlag{Name: "ttl", Usage: "life of the Felix token (`DURATION`, default 1h, at most 24h)"},
			&cli.StringFlag{Name: "refresh-out", Usage: "write the refresh token to `FILE`"},
		),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			if c.String("oidc-token") == "" {
				return usageErrorf(c, "--oidc-token is required")
			}
			if c.Duration("ttl") < 0 {
				return usageErrorf(c, "--ttl must be positive")
			}
			req := ExchangeRequest{Actions: splitPerms(c.StringSlice("actions")), Resources: splitPerms(c.StringSlice("resources"))}
			if d := c.Duration("ttl"); d > 0 {
				req.TTLSeconds = ttlSeconds(d)
			}
			return withCredential(c, c.String("oidc-token"), func(a *AdminClient, s Settings, p printer, _ string) error {
				out, err := a.Exchange(c.Context, s.Tenant, req)
				if err != nil {
					return withHint(err, "forbidden", "give the principal a role: felix admin rbac role assign PRINCIPAL ROLE")
				}
				return printExchange(c, p, out)
			})
		},
	})
}

func refreshCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "refresh",
		Usage:     "trade a refresh token for a new Felix token",
		ArgsUsage: " ",
		UsageText: "felix admin token refresh --refresh-token FILE [--refresh-out FILE] [--tenant T] [-o json]",
		Description: "Each refresh token works once: keep the new one (--refresh-out may name the same FILE).\n" +
			"Using an old one again after the control plane's reuse grace revokes the whole chain.\n" +
			"Example:\n\n   felix admin token refresh --refresh-token rt --refresh-out rt > felix.token",
		Flags: clientFlags(
			&cli.StringFlag{Name: "refresh-token", Usage: "`FILE` holding the refresh token ('-': standard input)"},
			&cli.StringFlag{Name: "refresh-out", Usage: "write the new refresh token to `FILE`"},
		),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			if c.String("refresh-token") == "" {
				return usageErrorf(c, "--refresh-token is required")
			}
			return withCredential(c, c.String("refresh-token"), func(a *AdminClient, s Settings, p printer, cred string) error {
				out, err := a.Refresh(c.Context, s.Tenant, cred)
				if err != nil {
					return err
				}
				return printExchange(c, p, out)
			})
		},
	})
}

// withCredential runs fn with an admin client whose bearer token is the
// credential read from file (no Felix token is needed).
func withCredential(c *cli.Context, file string, fn func(*AdminClient, Settings, printer, string) error) error {
	p, err := newPrinter(c)
	if err != nil {
		return err
	}
	cred, err := readCredential(c, file)
	if err != nil {
		return exitError(err)
	}
	s, err := LoadClientSettings(c)
	if err != nil {
		return exitError(err)
	}
	s.Token = cred
	a, err := NewAdminClient(s)
	if err != nil {
		return exitError(err)
	}
	defer a.Close()
	return exitError(fn(a, s, p, cred))
}

func readCredential(c *cli.Context, file string) (string, error) {
	var r io.Reader = c.App.Reader
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxCredentialFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxCredentialFile {
		return "", fmt.Errorf("%s: larger than %d bytes", file, maxCredentialFile)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s holds no token", file)
	}
	return tok, nil
}

func printExchange(c *cli.Context, p printer, out ExchangeResponse) error {
	if f := c.String("refresh-out"); f != "" {
		if err := writeSecret(f, out.RefreshToken); err != nil {
			return err
		}
	}
	if p.json {
		return p.JSON(out)
	}
	return p.Line("%s", out.Token)
}

// writeSecret replaces file with v, readable by the owner only.
func writeSecret(file, v string) error {
	tmp := file + ".tmp-" + fmt.Sprint(time.Now().UnixNano())
	if err := os.WriteFile(tmp, []byte(v+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/wire"
)

// RevokeRequest is the body of a revocation.
type RevokeRequest struct {
	Subject string `json:"subject"`
	Reason  string `json:"reason,omitempty"`
}

// Revoke withdraws every token of subject in tenant issued until now.
func (a *AdminClient) Revoke(ctx context.Context, tenant string, req RevokeRequest) (wire.Revocation, error) {
	var out wire.Revocation
	err := a.do(ctx, http.MethodPost, apiPath("tenants", tenant, "revocations"), nil, req, &out)
	return out, err
}

// Revocations lists a tenant's revocations.
func (a *AdminClient) Revocations(ctx context.Context, tenant string) ([]wire.Revocation, error) {
	return list[wire.Revocation](ctx, a, apiPath("tenants", tenant, "revocations"), "revocations")
}

// Unrevoke lifts subject's revocation in tenant.
func (a *AdminClient) Unrevoke(ctx context.Context, tenant, subject string) error {
	return a.do(ctx, http.MethodDelete, apiPath("tenants", tenant, "revocations", subject), nil, nil, nil)
}

// withRevocationCommands adds revoke, revocations and unrevoke to the
// token command.
func withRevocationCommands(token *cli.Command) *cli.Command {
	token.Subcommands = append(token.Subcommands, revokeCommand(), revocationsCommand(), unrevokeCommand())
	token.UsageText += "\nfelix admin token revoke|unrevoke --sub NAME [--reason TEXT]\nfelix admin token revocations"
	return token
}

func revokeCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "revoke",
		Usage:     "revoke every token of a subject issued until now",
		ArgsUsage: " ",
		UsageText: "felix admin token revoke --sub NAME [--reason TEXT] [--tenant T] [-o json]",
		Description: "Tells every broker to refuse the tokens of subject --sub in --tenant that were issued\n" +
			"before now, and to end the streams and subscriptions opened with them. Tokens minted\n" +
			"afterwards work. Example:\n\n" +
			"   felix admin token revoke --sub worker --reason 'laptop lost'",
		Flags: clientFlags(
			&cli.StringFlag{Name: "sub", Usage: "subject `NAME` whose tokens to revoke"},
			&cli.StringFlag{Name: "reason", Usage: "why, for the record (`TEXT`)"},
		),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			if c.String("sub") == "" {
				return usageErrorf(c, "--sub is required")
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				rev, err := a.Revoke(c.Context, s.Tenant, RevokeRequest{Subject: c.String("sub"), Reason: c.String("reason")})
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(rev)
				}
				return p.Line("revoked tokens of %s in tenant %s issued before %s", rev.Subject, rev.TenantID, unixText(rev.RevokedBefore))
			})
		},
	})
}

func revocationsCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:        "revocations",
		Usage:       "list the tenant's revoked subjects",
		ArgsUsage:   " ",
		UsageText:   "felix admin token revocations [--tenant T] [-o json]",
		Description: "Lists the subjects of --tenant whose older tokens are revoked. Example:\n\n   felix admin token revocations -o json",
		Flags:       clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				revs, err := a.Revocations(c.Context, s.Tenant)
				if err != nil {
					return err
				}
				if p.json {
					if revs == nil {
						revs = []wire.Revocation{}
					}
					return p.JSON(revs)
				}
				rows := make([][]string, 0, len(revs))
				for _, r := range revs {
					rows = append(rows, []string{r.Subject, unixText(r.RevokedBefore), orDash(r.Reason)})
				}
				return p.Table([]string{"SUBJECT", "REVOKED BEFORE", "REASON"}, rows)
			})
		},
	})
}

func unrevokeCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "unrevoke",
		Usage:     "lift a subject's revocation",
		ArgsUsage: " ",
		UsageText: "felix admin token unrevoke --sub NAME [--tenant T]",
		Description: "Lets the subject's tokens work again, including the ones issued before the revocation.\n" +
			"Example:\n\n   felix admin token unrevoke --sub worker",
		Flags: clientFlags(&cli.StringFlag{Name: "sub", Usage: "subject `NAME` to lift the revocation of"}),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			if c.String("sub") == "" {
				return usageErrorf(c, "--sub is required")
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				if err := a.Unrevoke(c.Context, s.Tenant, c.String("sub")); err != nil {
					return withHint(err, "not_found", fmt.Sprintf("%s is not revoked; see felix admin token revocations", c.String("sub")))
				}
				return p.Line("lifted the revocation of %s in tenant %s", c.String("sub"), s.Tenant)
			})
		},
	})
}

func unixText(sec int64) string { return time.Unix(sec, 0).UTC().Format(time.RFC3339) }

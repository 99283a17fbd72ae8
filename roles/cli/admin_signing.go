package cli

import (
	"context"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"
)

// RotateResponse names the new signing key and every key in the JWKS.
type RotateResponse struct {
	KID  string   `json:"kid"`
	KIDs []string `json:"kids"`
}

// RotateSigningKey makes a new key sign Felix tokens (cluster.manage).
func (a *AdminClient) RotateSigningKey(ctx context.Context) (RotateResponse, error) {
	var out RotateResponse
	err := a.do(ctx, http.MethodPost, "/v1/signing-keys/rotate", nil, nil, &out)
	return out, err
}

// withSigningCommands adds rotate-key to the token command.
func withSigningCommands(token *cli.Command) *cli.Command {
	token.Subcommands = append(token.Subcommands, rotateKeyCommand())
	token.UsageText += "\nfelix admin token rotate-key"
	return token
}

func rotateKeyCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "rotate-key",
		Usage:     "make a new key sign Felix tokens",
		ArgsUsage: " ",
		UsageText: "felix admin token rotate-key [-o json]",
		Description: "New tokens are signed with a fresh key; older keys stay in the JWKS until every token\n" +
			"they signed has expired, and brokers fetch the new key when they first meet it. Needs\n" +
			"cluster.manage. Example:\n\n   felix admin token rotate-key",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, _ Settings, p printer) error {
				out, err := a.RotateSigningKey(c.Context)
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(out)
				}
				return p.Line("signing key is now %s (keys in the JWKS: %s)", out.KID, strings.Join(out.KIDs, ", "))
			})
		},
	})
}

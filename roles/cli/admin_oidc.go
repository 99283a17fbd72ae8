package cli

import (
	"context"
	"net/http"

	"github.com/urfave/cli/v2"
)

// OIDCConfig is a tenant's upstream identity provider (see
// docs/auth.md). Exactly one of JWKSURL and JWKSFile is set.
type OIDCConfig struct {
	Issuer         string `json:"issuer"`
	Audience       string `json:"audience"`
	JWKSURL        string `json:"jwks_url,omitempty"`
	JWKSFile       string `json:"jwks_file,omitempty"`
	PrincipalClaim string `json:"principal_claim,omitempty"`
}

// SetOIDC sets tenant's issuer configuration.
func (a *AdminClient) SetOIDC(ctx context.Context, tenant string, c OIDCConfig) (OIDCConfig, error) {
	var out OIDCConfig
	err := a.do(ctx, http.MethodPut, apiPath("tenants", tenant, "oidc"), nil, c, &out)
	return out, err
}

// OIDC reads tenant's issuer configuration.
func (a *AdminClient) OIDC(ctx context.Context, tenant string) (OIDCConfig, error) {
	return get[OIDCConfig](ctx, a, apiPath("tenants", tenant, "oidc"))
}

func oidcCommand() *cli.Command {
	return group(&cli.Command{
		Name:        "oidc",
		Usage:       "set or show the tenant's OIDC issuer (whose tokens token exchange accepts)",
		UsageText:   "felix admin oidc set --issuer URL --audience AUD --jwks-url URL|--jwks-file FILE [--principal-claim sub]\nfelix admin oidc get",
		Description: "Example:\n\n   felix admin oidc set --issuer https://idp.example.com --audience felix --jwks-url https://idp.example.com/jwks",
		Subcommands: []*cli.Command{oidcSetCommand(), oidcGetCommand()},
	})
}

func oidcSetCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "set",
		Usage:     "set the tenant's OIDC issuer",
		ArgsUsage: " ",
		UsageText: "felix admin oidc set --issuer URL --audience AUD --jwks-url URL|--jwks-file FILE [--principal-claim CLAIM] [--tenant T]",
		Description: "Upstream tokens must carry iss = --issuer and --audience in aud, and be signed by a key of\n" +
			"the JWKS at --jwks-url or in --jwks-file (a path on the control plane's hosts). The\n" +
			"principal is the --principal-claim claim (default sub). Example:\n\n" +
			"   felix admin oidc set --issuer https://idp.example.com --audience felix --jwks-file /etc/felix/idp.jwks",
		Flags: clientFlags(
			&cli.StringFlag{Name: "issuer", Usage: "the iss of upstream tokens (`URL`)"},
			&cli.StringFlag{Name: "audience", Usage: "a value upstream tokens' aud must hold (`AUD`)"},
			&cli.StringFlag{Name: "jwks-url", Usage: "`URL` of the issuer's JWKS"},
			&cli.StringFlag{Name: "jwks-file", Usage: "JWKS `FILE` on the control plane's hosts"},
			&cli.StringFlag{Name: "principal-claim", Usage: "`CLAIM` naming the principal (default sub)"},
		),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			cfg := OIDCConfig{Issuer: c.String("issuer"), Audience: c.String("audience"), JWKSURL: c.String("jwks-url"),
				JWKSFile: c.String("jwks-file"), PrincipalClaim: c.String("principal-claim")}
			switch {
			case cfg.Issuer == "" || cfg.Audience == "":
				return usageErrorf(c, "--issuer and --audience are required")
			case (cfg.JWKSURL == "") == (cfg.JWKSFile == ""):
				return usageErrorf(c, "give exactly one of --jwks-url and --jwks-file")
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				out, err := a.SetOIDC(c.Context, s.Tenant, cfg)
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(out)
				}
				return p.Line("tenant %s now accepts OIDC tokens of %s for audience %s", s.Tenant, out.Issuer, out.Audience)
			})
		},
	})
}

func oidcGetCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:        "get",
		Usage:       "show the tenant's OIDC issuer",
		ArgsUsage:   " ",
		UsageText:   "felix admin oidc get [--tenant T] [-o json]",
		Description: "Example:\n\n   felix admin oidc get -o json",
		Flags:       clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				cfg, err := a.OIDC(c.Context, s.Tenant)
				if err != nil {
					return withHint(err, "not_found", "set one with felix admin oidc set")
				}
				if p.json {
					return p.JSON(cfg)
				}
				jwks := cfg.JWKSURL
				if jwks == "" {
					jwks = cfg.JWKSFile
				}
				claim := cfg.PrincipalClaim
				if claim == "" {
					claim = "sub"
				}
				return p.Table([]string{"ISSUER", "AUDIENCE", "JWKS", "PRINCIPAL CLAIM"}, [][]string{{cfg.Issuer, cfg.Audience, jwks, claim}})
			})
		},
	})
}

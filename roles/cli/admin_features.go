package cli

import (
	"context"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/wire"
)

// FleetFeatures reads the fleet-wide feature gate (GET /v1/fleet/features).
func (a *AdminClient) FleetFeatures(ctx context.Context) (wire.FleetFeaturesView, error) {
	var v wire.FleetFeaturesView
	err := a.do(ctx, http.MethodGet, apiPath("fleet", "features"), nil, nil, &v)
	return v, err
}

// FinalizeFeatures turns fleet features on for good; none means every
// supported one (POST /v1/fleet/features/finalize).
func (a *AdminClient) FinalizeFeatures(ctx context.Context, features []string) (wire.FleetFeaturesView, error) {
	var v wire.FleetFeaturesView
	err := a.do(ctx, http.MethodPost, apiPath("fleet", "features", "finalize"), nil, wire.FinalizeRequest{Features: features}, &v)
	return v, err
}

func featuresCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "features",
		Usage:     "show or finalize the fleet-wide feature gate",
		UsageText: "felix admin features list [-o json]\nfelix admin features finalize [FEATURE...] [-o json]",
		Description: "Cross-broker features turn on only once finalized, which is refused while a live broker\n" +
			"lacks them; a new cluster finalizes every feature its first broker reports except\n" +
			"publisher_principal. Finalizing cannot be undone. Examples:\n\n" +
			"   felix admin features list\n" +
			"   felix admin features finalize publisher_principal",
		Subcommands: []*cli.Command{featuresListCommand(), featuresFinalizeCommand()},
	})
}

func featuresListCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "list",
		Aliases:   []string{"ls"},
		Usage:     "list each fleet feature: supported by every live broker? finalized?",
		ArgsUsage: " ",
		UsageText: "felix admin features list [-o json]",
		Description: "Lists every fleet feature, whether every live broker supports it (and which lack it),\n" +
			"and whether it is finalized. Example:\n\n   felix admin features list -o json",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, _ Settings, p printer) error {
				v, err := a.FleetFeatures(c.Context)
				if err != nil {
					return err
				}
				return printFeatures(p, v)
			})
		},
	})
}

func featuresFinalizeCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "finalize",
		Usage:     "turn fleet features on for good (none named: every supported one)",
		ArgsUsage: "[FEATURE...]",
		UsageText: "felix admin features finalize [FEATURE...] [-o json]",
		Description: "Finalizes the features named, or every feature all live brokers support. Refused,\n" +
			"naming the brokers, while a live broker lacks one; afterwards a broker without it is\n" +
			"refused at registration. Example:\n\n   felix admin features finalize publisher_principal",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, -1); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, _ Settings, p printer) error {
				v, err := a.FinalizeFeatures(c.Context, c.Args().Slice())
				if err != nil {
					return err
				}
				return printFeatures(p, v)
			})
		},
	})
}

func printFeatures(p printer, v wire.FleetFeaturesView) error {
	if v.Features == nil {
		v.Features = []wire.FleetFeature{}
	}
	if p.json {
		return p.JSON(v)
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	rows := make([][]string, 0, len(v.Features))
	for _, f := range v.Features {
		missing := strings.Join(f.Missing, ",")
		if missing == "" {
			missing = "-"
		}
		rows = append(rows, []string{f.Name, yes(f.Supported), yes(f.Finalized), missing})
	}
	return p.Table([]string{"FEATURE", "SUPPORTED", "FINALIZED", "MISSING"}, rows)
}

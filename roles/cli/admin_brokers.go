package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/wire"
)

// Brokers lists the registered brokers (GET /v1/brokers).
func (a *AdminClient) Brokers(ctx context.Context) ([]wire.Broker, error) {
	var l struct {
		Items []wire.Broker `json:"items"`
	}
	err := a.do(ctx, http.MethodGet, apiPath("brokers"), nil, nil, &l)
	return l.Items, err
}

func brokersCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "brokers",
		Usage:     "show the brokers registered with the control plane",
		UsageText: "felix admin brokers list [-o json]\nfelix admin brokers deregister NODE [--yes]",
		Description: "Shows every broker that registered with the control plane: its node id, the addresses\n" +
			"clients reach it at, its zone, its state (live, down after its heartbeats stopped, or\n" +
			"deregistered), the shards placed on it and its last heartbeat. Example:\n\n" +
			"   felix admin brokers list",
		Subcommands: []*cli.Command{brokersListCommand(), brokersDeregisterCommand()},
	})
}

func brokersListCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "list",
		Aliases:   []string{"ls"},
		Usage:     "list the registered brokers and their state",
		ArgsUsage: " ",
		UsageText: "felix admin brokers list [-o json]",
		Description: "Lists every registered broker, ordered by node id. SHARDS counts the shards the\n" +
			"placement gives it (felix admin placement show). Example:\n\n   felix admin brokers list -o json",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, _ Settings, p printer) error {
				brokers, err := a.Brokers(c.Context)
				if err != nil {
					return err
				}
				if brokers == nil {
					brokers = []wire.Broker{}
				}
				if p.json {
					return p.JSON(brokers)
				}
				return printBrokers(p, brokers, time.Now())
			})
		},
	})
}

// DeregisterBroker removes a broker from the fleet (DELETE /v1/brokers/{node}).
func (a *AdminClient) DeregisterBroker(ctx context.Context, node string) error {
	return a.do(ctx, http.MethodDelete, apiPath("brokers", node), nil, nil, nil)
}

func brokersDeregisterCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "deregister",
		Usage:     "remove a broker that is gone for good from the fleet",
		ArgsUsage: "NODE",
		UsageText: "felix admin brokers deregister NODE [--yes]",
		Description: "Marks the broker NODE deregistered, so it no longer counts for the feature gate. Stop\n" +
			"it first: a broker still running registers again at its next heartbeat. On a terminal it\n" +
			"asks first; otherwise --yes is required. Example:\n\n   felix admin brokers deregister broker-3 --yes",
		Flags: clientFlags(&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "deregister without asking"}),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, _ Settings, p printer) error {
				node := c.Args().First()
				if err := confirm(c, "broker "+node); err != nil {
					return err
				}
				if err := a.DeregisterBroker(c.Context, node); err != nil {
					return err
				}
				if p.json {
					return p.JSON(map[string]string{"deregistered": node})
				}
				return p.Line("deregistered broker %s", node)
			})
		},
	})
}

func printBrokers(p printer, brokers []wire.Broker, now time.Time) error {
	rows := make([][]string, 0, len(brokers))
	for _, b := range brokers {
		zone, shards := b.Zone, fmt.Sprint(b.ShardsOwned)
		if zone == "" {
			zone = "-"
		}
		rows = append(rows, []string{b.NodeID, strings.Join(b.ClientAddrs, ","), zone, string(b.State), shards, heartbeatAge(b.LastHeartbeatMs, now)})
	}
	return p.Table([]string{"NODE", "ADDRESSES", "ZONE", "STATE", "SHARDS", "LAST HEARTBEAT"}, rows)
}

// heartbeatAge shows a Unix-ms time as UTC with its age, e.g.
// "2026-12-01T16:00:00Z (3s ago)".
func heartbeatAge(ms int64, now time.Time) string {
	if ms == 0 {
		return "-"
	}
	t := time.UnixMilli(ms).UTC()
	age := now.Sub(t).Round(time.Second)
	if age < 0 {
		age = 0
	}
	return fmt.Sprintf("%s (%s ago)", t.Format(time.RFC3339), age)
}

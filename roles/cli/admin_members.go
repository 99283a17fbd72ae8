package cli

import (
	"context"
	"fmt"
	"net/http"

	"github.com/urfave/cli/v2"
)

// Members is the control plane's Raft group as one member sees it
// (GET /v1/members).
type Members struct {
	ID         uint64   `json:"id"`
	Leader     uint64   `json:"leader"`
	Term       uint64   `json:"term"`
	Commit     uint64   `json:"commit"`
	Applied    uint64   `json:"applied"`
	Role       string   `json:"role"`
	Ready      bool     `json:"ready"`
	CatchingUp bool     `json:"catching_up"`
	Members    []Member `json:"members"`
}

// Member is one member of the group.
type Member struct {
	ID     uint64 `json:"id"`
	URL    string `json:"url"`
	Voter  bool   `json:"voter"`
	Leader bool   `json:"leader"`
}

// Members fetches the Raft status of the control plane member answering.
func (a *AdminClient) Members(ctx context.Context) (Members, error) {
	var m Members
	err := a.do(ctx, http.MethodGet, apiPath("members"), nil, nil, &m)
	return m, err
}

func membersCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "members",
		Usage:     "show the control plane's Raft members",
		UsageText: "felix admin members list [-o json]",
		Description: "Shows the members of the control plane's Raft group as the member at --controlplane sees\n" +
			"them: the leader, the term, and each member's role (voter, or learner while it catches up).\n" +
			"Example:\n\n   felix admin members list",
		Subcommands: []*cli.Command{membersListCommand()},
	})
}

func membersListCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "list",
		Aliases:   []string{"ls"},
		Usage:     "list the Raft members, the leader and the applied index",
		ArgsUsage: " ",
		UsageText: "felix admin members list [-o json]",
		Description: "Lists every member with its peer URL and whether it votes or is a learner, marks the\n" +
			"leader, and prints the answering member's term, commit and applied index. Example:\n\n" +
			"   felix admin members list -o json",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, _ Settings, p printer) error {
				m, err := a.Members(c.Context)
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(m)
				}
				return printMembers(p, m)
			})
		},
	})
}

func printMembers(p printer, m Members) error {
	rows := make([][]string, 0, len(m.Members))
	for _, mb := range m.Members {
		role := "learner"
		if mb.Voter {
			role = "voter"
		}
		leader := ""
		if mb.Leader {
			leader = "leader"
		}
		applied := "-"
		if mb.ID == m.ID {
			applied = fmt.Sprint(m.Applied)
		}
		rows = append(rows, []string{fmt.Sprint(mb.ID), mb.URL, role, leader, applied})
	}
	if err := p.Table([]string{"ID", "URL", "ROLE", "LEADER", "APPLIED"}, rows); err != nil {
		return err
	}
	leader := "none"
	if m.Leader != 0 {
		leader = fmt.Sprint(m.Leader)
	}
	return p.Line("answered by member %d (%s, ready=%v): leader %s, term %d, commit %d, applied %d",
		m.ID, m.Role, m.Ready, leader, m.Term, m.Commit, m.Applied)
}

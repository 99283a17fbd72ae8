package serve

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	felixcli "github.com/felixmq/felix/roles/cli"
	"github.com/felixmq/felix/roles/cli/bench"
	"github.com/felixmq/felix/roles/dev"
)

// BuildInfo is what the binary was built from (buildinfo.Read).
type BuildInfo = felixcli.BuildInfo

// App builds the felix command-line app. Every command follows one
// convention for usage errors (felixcli.ApplyConventions): one line naming
// the --flag, a pointer to --help, exit code 2. --version prints the build
// on one line; `felix version` prints it in full.
func App(build BuildInfo) *cli.App {
	app := &cli.App{
		Name:  "felix",
		Usage: "a data plane for fast-changing state: pub/sub, durable streams and a watched cache over QUIC",
		// urfave prints "felix version " + Version for --version.
		Version: strings.TrimPrefix(build.String(), "felix "),
		Description: "felix serve runs a broker and its control plane on this machine, with everything kept under\n" +
			"--data-dir (./felix-data). In the same directory the client commands need no flags:\n\n" +
			"   felix serve &\n" +
			"   felix admin stream create events\n" +
			"   felix sub events --count 1 &\n" +
			"   felix pub events hello\n\n" +
			"Elsewhere they read $XDG_CONFIG_HOME/felix/client.json (~/.config/felix/client.json), or the\n" +
			"file --data-dir, --context or FELIX_CLIENT_CONFIG names (docs/operations.md, Client settings).\n" +
			"Exit codes: 0 done, 1 failed (the error says why, often with a hint), 2 usage error.",
		EnableBashCompletion: true, // the hook of `felix completion bash|zsh`
		// Main reports errors and picks the exit code; the default handler would os.Exit.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	app.Commands = append([]*cli.Command{
		{
			Name:      "serve",
			Usage:     "run a broker and a control plane in one process",
			UsageText: "felix serve [--data-dir DIR] [--broker-addr HOST:PORT] [--controlplane-addr HOST:PORT] [--metrics-addr HOST:PORT] [--raft-node-id N --raft-peers 1=URL,2=URL,3=URL] [--config FILE]",
			Description: "Starts the control plane (REST on --controlplane-addr), the broker (QUIC on --broker-addr) and\nthe metrics/health endpoints. The first start creates the default tenant and namespace, a\ndevelopment CA, an admin token and client.json in --data-dir. SIGTERM drains gracefully; a\nsecond signal exits at once.\n\n" +
				"With --raft-peers the node is member --raft-node-id of a multi-node cluster: its control plane\n" +
				"is a voter of that Raft group and its broker's node id defaults to broker-<raft node id>\n" +
				"(FELIX_NODE_ID overrides it). The nodes' development certificates must come from one CA: put\n" +
				"the same tls/ca.pem and tls/ca-key.pem in every --data-dir before the first start (felix dev\n" +
				"does), or give operator certificates (docs/operations.md, Running a cluster).",
			Flags:  append(roleFlags(true, true), raftFlags()...),
			Action: func(c *cli.Context) error { return runNode(c, true, true) },
		},
		{
			Name:        "broker",
			Usage:       "run only a broker, syncing the catalog from a control plane over HTTP",
			UsageText:   "felix broker --controlplane-url URL [--token-file FILE] [--broker-addr HOST:PORT] [--metrics-addr HOST:PORT]",
			Description: "The broker learns tenants, namespaces, streams, caches and token keys from the control plane's\nsnapshot and changes feeds, using a token with cluster.manage.",
			Flags:       roleFlags(false, true),
			Action:      func(c *cli.Context) error { return runNode(c, false, true) },
		},
		{
			Name:      "controlplane",
			Usage:     "run only the control plane (catalog, tokens, JWKS), alone or as a member of a Raft group",
			UsageText: "felix controlplane [--data-dir DIR] [--controlplane-addr HOST:PORT] [--raft-node-id N --raft-peers 1=URL,2=URL,3=URL] [--raft-data-dir DIR]",
			Description: "Without --raft-peers the control plane is a one-voter Raft group. With them it is member\n" +
				"--raft-node-id of that group: writes on any member are forwarded to the leader, reads are\n" +
				"linearizable, and /ready is false while the member cannot reach a quorum. Peers listen on the\n" +
				"host:port of their own --raft-peers entry, with TLS when FELIX_CONTROLPLANE_TLS_CERT/_KEY are\n" +
				"set (mutual with FELIX_CONTROLPLANE_TLS_CLIENT_CA).",
			Flags:  append(roleFlags(true, false), raftFlags()...),
			Action: func(c *cli.Context) error { return runNode(c, true, false) },
		},
	}, felixcli.Commands(build)...)
	app.Commands = append(app.Commands, dev.Command(), bench.Command())
	felixcli.ApplyConventions(app)
	return app
}

// Main runs the app on args and returns the process exit code.
func Main(args []string, build BuildInfo) int {
	app := App(build)
	err := felixcli.UsageExit(app.Run(permuteArgs(app, args)))
	if err == nil {
		return 0
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := ec.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "error:", err)
	return 1
}

// completionFlag is what the completion scripts append to the words typed
// so far (felix completion bash|zsh): urfave answers with the words that
// fit only when it comes last.
const completionFlag = "--generate-bash-completion"

// permuteArgs is felixcli.PermuteArgs, except for a completion request,
// which must stay as typed: moved ahead of the positional arguments, the
// flag would no longer be last, and `felix pub events hello --ack<TAB>`
// would publish instead of completing.
func permuteArgs(app *cli.App, args []string) []string {
	if len(args) > 0 && args[len(args)-1] == completionFlag {
		return args
	}
	return felixcli.PermuteArgs(app, args)
}

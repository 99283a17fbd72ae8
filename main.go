// Command felix is the Felix data plane: broker, control plane and client
// tools in one binary. The app is assembled in roles/serve; main only runs it.
package main

import (
	"os"

	"github.com/felixmq/felix/roles/serve"
)

// Set by the release build with -ldflags "-X main.version=...".
var (
	version = "dev"
	commit  = "none"
	date    = "unknown"
)

func main() {
	os.Exit(serve.Main(os.Args, serve.BuildInfo{Version: version, Commit: commit, Date: date}))
}

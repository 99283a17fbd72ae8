// Command felix is the Felix data plane: broker, control plane and client
// tools in one binary. The app is assembled in roles/serve; main only runs it.
// A release build stamps the version with -ldflags on package
// internal/buildinfo (see its doc); a build from a git checkout reports
// the commit Go recorded.
package main

import (
	"os"

	"github.com/felixmq/felix/internal/buildinfo"
	"github.com/felixmq/felix/roles/serve"
)

func main() {
	os.Exit(serve.Main(os.Args, buildinfo.Read()))
}

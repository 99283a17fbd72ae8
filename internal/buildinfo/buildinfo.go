// Package buildinfo says what the felix binary was built from: a release
// build stamps Version, Commit and Date with -ldflags, and a build from a
// git checkout carries the commit in Go's own build information
// (runtime/debug.ReadBuildInfo, vcs.* settings). It is a leaf: it imports
// nothing of ours.
//
// A release build sets, for example:
//
//	go build -ldflags "-X github.com/felixmq/felix/internal/buildinfo.Version=v1.2.3 \
//	  -X github.com/felixmq/felix/internal/buildinfo.Commit=$(git rev-parse HEAD) \
//	  -X github.com/felixmq/felix/internal/buildinfo.Date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Unknown is what a field says when neither the release build nor Go's
// build information supplied it (for example a build with
// -buildvcs=false, as scripts/test does).
const Unknown = "unknown"

// Stamped by a release build with -ldflags -X; empty otherwise.
var (
	Version string
	Commit  string
	Date    string
)

// Info is what a binary was built from. Every field is non-empty:
// Unknown stands for what could not be learned.
type Info struct {
	Version  string // release version, "devel" for an unreleased build
	Commit   string // full VCS revision
	Date     string // build date (release) or commit time (checkout), RFC 3339
	Modified bool   // the checkout had uncommitted changes (vcs.modified)
}

// Read returns the build information of this binary: the -ldflags stamps
// first, else Go's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, Commit, Date, bi)
}

// resolve layers the stamps over bi (which may be nil).
func resolve(version, commit, date string, bi *debug.BuildInfo) Info {
	var vcsRev, vcsTime, modVersion string
	var modified bool
	if bi != nil {
		modVersion = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRev = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if commit != "" {
		// A release build names its commit; whatever the checkout held is
		// not the question.
		modified = false
	}
	if modVersion == "(devel)" {
		modVersion = ""
	}
	return Info{
		Version:  first(version, modVersion, "devel"),
		Commit:   first(commit, vcsRev, Unknown),
		Date:     first(date, vcsTime, Unknown),
		Modified: modified,
	}
}

// Short is the commit shortened to 12 characters, with "+dirty" when the
// checkout had uncommitted changes.
func (i Info) Short() string {
	c := i.Commit
	if c != Unknown && len(c) > 12 {
		c = c[:12]
	}
	if i.Modified {
		c += "+dirty"
	}
	return c
}

// String is the one-line form `felix --version` prints, for example
// "felix devel (commit 0123456789ab+dirty, 2026-12-01T15:00:00Z)".
func (i Info) String() string {
	return "felix " + i.Version + " (commit " + i.Short() + ", " + i.Date + ")"
}

func first(vals ...string) string {
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

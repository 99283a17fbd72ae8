package buildinfo

import (
	"runtime/debug"
	"testing"
)

func vcs(rev, time, modified string) *debug.BuildInfo {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/felixmq/felix", Version: "(devel)"}}
	for k, v := range map[string]string{"vcs.revision": rev, "vcs.time": time, "vcs.modified": modified} {
		if v != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
		}
	}
	return bi
}

func TestResolve(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  Info
		line                  string
	}{
		{name: "release stamps win", version: "v1.2.3", commit: "feedface", date: "2026-12-01T00:00:00Z",
			bi:   vcs(rev, "2026-11-30T10:00:00Z", "true"),
			want: Info{Version: "v1.2.3", Commit: "feedface", Date: "2026-12-01T00:00:00Z"},
			line: "felix v1.2.3 (commit feedface, 2026-12-01T00:00:00Z)"},
		{name: "checkout", bi: vcs(rev, "2026-11-30T10:00:00Z", "false"),
			want: Info{Version: "devel", Commit: rev, Date: "2026-11-30T10:00:00Z"},
			line: "felix devel (commit 0123456789ab, 2026-11-30T10:00:00Z)"},
		{name: "dirty checkout", bi: vcs(rev, "2026-11-30T10:00:00Z", "true"),
			want: Info{Version: "devel", Commit: rev, Date: "2026-11-30T10:00:00Z", Modified: true},
			line: "felix devel (commit 0123456789ab+dirty, 2026-11-30T10:00:00Z)"},
		{name: "buildvcs=false", bi: vcs("", "", ""),
			want: Info{Version: "devel", Commit: Unknown, Date: Unknown},
			line: "felix devel (commit unknown, unknown)"},
		{name: "no build info", want: Info{Version: "devel", Commit: Unknown, Date: Unknown},
			line: "felix devel (commit unknown, unknown)"},
		{name: "go install of a tagged module",
			bi:   &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}},
			want: Info{Version: "v0.9.0", Commit: Unknown, Date: Unknown},
			line: "felix v0.9.0 (commit unknown, unknown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.version, tc.commit, tc.date, tc.bi)
			if got != tc.want {
				t.Fatalf("resolve = %+v, want %+v", got, tc.want)
			}
			if got.String() != tc.line {
				t.Fatalf("String = %q, want %q", got.String(), tc.line)
			}
		})
	}
}

func TestReadNeverEmpty(t *testing.T) {
	i := Read()
	if i.Version == "" || i.Commit == "" || i.Date == "" {
		t.Fatalf("Read = %+v: every field must say something", i)
	}
}

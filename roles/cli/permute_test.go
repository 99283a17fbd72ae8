package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

func TestPermuteArgs(t *testing.T) {
	app := &cli.App{Name: "felix", Commands: Commands(BuildInfo{})}
	cases := []struct{ in, want string }{
		{"sub events --count 3", "sub --count 3 events"},
		{"sub --count 3 events", "sub --count 3 events"},
		{"sub events --count=3 -o json", "sub --count=3 -o json events"},
		{"pub events -- --not-a-flag", "pub -- events --not-a-flag"},
		{"pub events hello --ack --key k world", "pub --ack --key k events hello world"},
		{"pub events --ack -", "pub --ack events -"},
		{"admin stream create events --shards 4 --durable --retention-age 24h",
			"admin stream create --shards 4 --durable --retention-age 24h events"},
		{"admin stream rm events -y --tenant acme", "admin stream rm -y --tenant acme events"},
		{"cache get sessions k1 -o json", "cache get -o json sessions k1"},
		{"cache put sessions k1 v1 --ttl 30s", "cache put --ttl 30s sessions k1 v1"},
		{"version -o json", "version -o json"},
		{"nosuchcommand a --b c", "nosuchcommand a --b c"},
		{"sub events --count", "sub --count events"},
		{"", ""},
	}
	for _, tc := range cases {
		in := append([]string{"felix"}, strings.Fields(tc.in)...)
		want := append([]string{"felix"}, strings.Fields(tc.want)...)
		if got := PermuteArgs(app, in); !slices.Equal(got, want) {
			t.Errorf("PermuteArgs(%q) = %q, want %q", tc.in, got, want)
		}
	}
}

func TestFlagsAfterArgumentsParseTheSame(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	events := []felix.Event{{Payload: []byte("a")}, {Payload: []byte("b")}, {Payload: []byte("c")}, {Payload: []byte("d")}}
	for _, args := range [][]string{
		{"sub", "events", "--count", "3", "--data-dir", dir},
		{"sub", "--count", "3", "events", "--data-dir", dir},
	} {
		fb := &fakeBroker{events: events}
		r := run(t, fb.toolkit(), nil, args...)
		if r.err != nil {
			t.Fatalf("%q: %v", args, r.err)
		}
		if r.stdout != "a\nb\nc\n" || fb.subStream != "events" {
			t.Errorf("%q: printed %q from stream %q", args, r.stdout, fb.subStream)
		}
	}
}

func TestPubKeepsLiteralAfterDashDash(t *testing.T) {
	clearEnv(t)
	fb := &fakeBroker{}
	r := run(t, fb.toolkit(), nil, "pub", "events", "--data-dir", t.TempDir(), "--", "--not-a-flag", "-x")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !slices.Equal(fb.published, []string{"--not-a-flag", "-x"}) {
		t.Fatalf("published %q", fb.published)
	}
	if fb.finished != 1 || !fb.closed {
		t.Fatalf("finished %d closed %v; want Finish then Close without --ack", fb.finished, fb.closed)
	}
}

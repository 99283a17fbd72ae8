package auth

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestNarrowExamples(t *testing.T) {
	cases := []struct {
		name               string
		granted            []string
		actions, resources []string
		want               []string
	}{
		{"inside a grant: kept as asked",
			[]string{"stream.*:stream:acme/*"}, []string{"stream.publish"}, []string{"stream:acme/prod/orders"},
			[]string{"stream.publish:stream:acme/prod/orders"}},
		{"wider than the grant: intersected to the grant",
			[]string{"stream.publish:stream:acme/prod/*"}, []string{"stream.*"}, []string{"stream:acme/*"},
			[]string{"stream.publish:stream:acme/prod/*"}},
		{"action narrower, resource wider",
			[]string{"stream.*:stream:acme/prod"}, []string{"stream.subscribe"}, []string{"stream:acme"},
			[]string{"stream.subscribe:stream:acme/prod"}},
		{"outside every grant: dropped",
			[]string{"cache.read:cache:acme/prod/sessions"}, []string{"cache.write"}, []string{"cache:acme/prod/sessions"},
			nil},
		{"other tenant: dropped",
			[]string{"*:stream:acme/*"}, []string{"stream.publish"}, []string{"stream:beta/x/y"},
			nil},
		{"admin grant: the request as asked",
			[]string{"*:*"}, []string{"stream.publish", "cache.read"}, []string{"stream:acme/p/s"},
			[]string{"stream.publish:stream:acme/p/s", "cache.read:stream:acme/p/s"}},
		{"several grants, no duplicates",
			[]string{"stream.publish:stream:acme/a/*", "stream.publish:stream:acme/a/*", "stream.subscribe:stream:acme/b/*"},
			[]string{"stream.*"}, []string{"stream:acme"},
			[]string{"stream.publish:stream:acme/a/*", "stream.subscribe:stream:acme/b/*"}},
		{"malformed entries ignored",
			[]string{"nocolon", "stream.publish:stream:acme/*"}, []string{"stream.publish", ""}, []string{"stream:acme/x/y", "bad space"},
			[]string{"stream.publish:stream:acme/x/y"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Narrow(tc.granted, tc.actions, tc.resources); !slices.Equal(got, tc.want) {
				t.Fatalf("Narrow = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNarrowNeverWidens checks, for random grants and requests, that
// whatever the narrowed permissions allow, both the grants and the
// request allow too.
func TestNarrowNeverWidens(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	actions := []Action{"a.b", "a.c", "b.b", "a", "ab"}
	kept := 0
	for range 20_000 {
		granted := make([]string, 1+r.IntN(3))
		for i := range granted {
			granted[i] = randString(r, "ab.*", 1, 4) + ":" + randString(r, "ab/*", 1, 6)
		}
		reqA := make([]string, 1+r.IntN(2))
		for i := range reqA {
			reqA[i] = randString(r, "ab.*", 1, 4)
		}
		reqR := make([]string, 1+r.IntN(2))
		for i := range reqR {
			reqR[i] = randString(r, "ab/*", 1, 6)
		}
		got := Narrow(granted, reqA, reqR)
		if len(got) == 0 {
			continue
		}
		kept++
		var requested []string
		for _, a := range reqA {
			for _, res := range reqR {
				requested = append(requested, a+":"+res)
			}
		}
		gm, rm, nm := mustCompile(t, granted...), mustCompile(t, requested...), mustCompile(t, got...)
		for range 16 {
			a := actions[r.IntN(len(actions))]
			res := randString(r, "ab/", 0, 9)
			if nm.Allows(a, res) && (!gm.Allows(a, res) || !rm.Allows(a, res)) {
				t.Fatalf("granted %q, request %q x %q: narrowed %q allows %s on %q; granted %v, requested %v",
					granted, reqA, reqR, got, a, res, gm.Allows(a, res), rm.Allows(a, res))
			}
		}
	}
	if kept < 1000 {
		t.Fatalf("only %d random cases kept anything; the property is barely exercised", kept)
	}
}

package auth

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustCompile(t testing.TB, perms ...string) *Matcher {
	t.Helper()
	m, err := CompilePerms(perms)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCompilePermsRefusals(t *testing.T) {
	for _, p := range []string{
		"", "nocolon", ":stream:acme", "stream.publish:", ":", "stream.publish: stream:acme",
		"stream.publish:stream:acme\n", "stream publish:stream:acme", "a:b\x00",
	} {
		if _, err := CompilePerms([]string{"*:*", p}); err == nil {
			t.Errorf("CompilePerms(%q) succeeded", p)
		}
	}
	if m, err := CompilePerms(nil); err != nil || m.Allows(ActionStreamPublish, "stream:a/b/c") {
		t.Fatalf("empty perms: m=%v err=%v", m, err)
	}
}

func TestMatcherTable(t *testing.T) {
	type check struct {
		a     Action
		res   string
		allow bool
	}
	cases := []struct {
		name   string
		perms  []string
		checks []check
	}{
		{"exact stream", []string{"stream.publish:stream:acme/prod/orders"}, []check{
			{ActionStreamPublish, StreamResource("acme", "prod", "orders"), true},
			{ActionStreamPublish, StreamResource("acme", "prod", "orders2"), false},
			{ActionStreamPublish, StreamResource("acme", "prod", "order"), false},
			{ActionStreamSubscribe, StreamResource("acme", "prod", "orders"), false},
		}},
		{"namespace wildcard", []string{"stream.publish:stream:acme/prod/*"}, []check{
			{ActionStreamPublish, StreamResource("acme", "prod", "x"), true},
			{ActionStreamPublish, StreamResource("acme", "dev", "x"), false},
			{ActionStreamPublish, "stream:acme/prod", false},
		}},
		{"action wildcard", []string{"stream.*:stream:acme/*"}, []check{
			{ActionStreamPublish, StreamResource("acme", "prod", "x"), true},
			{ActionStreamSubscribe, StreamResource("acme", "dev", "y"), true},
			{ActionCacheRead, CacheResource("acme", "prod", "c", "k"), false},
			{ActionStreamPublish, StreamResource("beta", "prod", "x"), false},
		}},
		{"ancestor tenant", []string{"stream.subscribe:stream:acme"}, []check{
			{ActionStreamSubscribe, StreamResource("acme", "prod", "x"), true},
			{ActionStreamSubscribe, "stream:acme", true},
			{ActionStreamSubscribe, StreamResource("acme2", "prod", "x"), false},
			{ActionStreamSubscribe, "stream:acme2", false},
			{ActionStreamSubscribe, "stream:acmeX/prod", false},
		}},
		{"ancestor cache", []string{"cache.read:cache:acme/prod/sessions"}, []check{
			{ActionCacheRead, CacheResource("acme", "prod", "sessions", "user-1"), true},
			{ActionCacheRead, CacheResource("acme", "prod", "sessions", "a/b/c"), true},
			{ActionCacheRead, CacheResource("acme", "prod", "sessions2", "user-1"), false},
			{ActionCacheWrite, CacheResource("acme", "prod", "sessions", "user-1"), false},
		}},
		{"cache key prefix", []string{"cache.read:cache:acme/prod/sessions/user-*"}, []check{
			{ActionCacheRead, CacheResource("acme", "prod", "sessions", "user-1"), true},
			{ActionCacheRead, CacheResource("acme", "prod", "sessions", "user-"), true},
			{ActionCacheRead, CacheResource("acme", "prod", "sessions", "admin-1"), false},
			{ActionCacheRead, CacheResource("acme", "prod", "sessions", "xuser-1"), false},
			{ActionCacheRead, CacheResource("acme", "prod", "other", "user-1"), false},
		}},
		{"wildcard in the middle with ancestor", []string{"cache.write:cache:acme/*/sessions"}, []check{
			{ActionCacheWrite, CacheResource("acme", "prod", "sessions", "k"), true},
			{ActionCacheWrite, CacheResource("acme", "dev", "sessions", "k/j"), true},
			{ActionCacheWrite, CacheResource("acme", "dev", "sessionsX", "k"), false},
			{ActionCacheWrite, CacheResource("acme2", "dev", "sessions", "k"), false},
		}},
		{"star matches slash", []string{"stream.publish:stream:acme/*x"}, []check{
			{ActionStreamPublish, StreamResource("acme", "prod", "x"), true},
			{ActionStreamPublish, StreamResource("acme", "x", "y"), true}, // ancestor "stream:acme/x"
			{ActionStreamPublish, StreamResource("acme", "prod", "y"), false},
		}},
		{"tenant and cluster", []string{"tenant.manage:tenant:acme", "token.create:tenant:acme"}, []check{
			{ActionTenantManage, TenantResource("acme"), true},
			{ActionTokenCreate, TenantResource("acme"), true},
			{ActionTenantManage, TenantResource("acme2"), false},
			{ActionClusterManage, ClusterResource, false},
		}},
		{"admin", []string{"*:*"}, []check{
			{ActionClusterManage, ClusterResource, true},
			{ActionCacheWrite, CacheResource("z", "y", "x", "w"), true},
			{Action("future.action"), "", true},
		}},
		{"star action, scoped resource", []string{"*:stream:acme"}, []check{
			{ActionStreamPublish, StreamResource("acme", "a", "b"), true},
			{ActionStreamSubscribe, StreamResource("acme", "a", "b"), true},
			{ActionStreamPublish, StreamResource("acme2", "a", "b"), false},
			{ActionCacheRead, CacheResource("acme", "a", "b", "c"), false},
		}},
		{"several grants", []string{"stream.publish:stream:a/x/*", "stream.publish:stream:b", "cache.*:cache:a"}, []check{
			{ActionStreamPublish, StreamResource("a", "x", "s"), true},
			{ActionStreamPublish, StreamResource("b", "y", "s"), true},
			{ActionStreamPublish, StreamResource("a", "y", "s"), false},
			{ActionCacheWrite, CacheResource("a", "n", "c", "k"), true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := mustCompile(t, c.perms...)
			for _, ch := range c.checks {
				if got := m.Allows(ch.a, ch.res); got != ch.allow {
					t.Errorf("Allows(%q, %q) = %v, want %v", ch.a, ch.res, got, ch.allow)
				}
				if got := naiveAllows(c.perms, ch.a, ch.res); got != ch.allow {
					t.Errorf("naive Allows(%q, %q) = %v, want %v (bad table)", ch.a, ch.res, got, ch.allow)
				}
			}
		})
	}
}

func TestMatcherNilAndPerms(t *testing.T) {
	var m *Matcher
	if m.Allows(ActionStreamPublish, "stream:a") || m.Perms() != nil {
		t.Fatal("nil matcher allows something")
	}
	in := []string{"stream.publish:stream:a", "*:*"}
	m = mustCompile(t, in...)
	out := m.Perms()
	if !slices.Equal(in, out) {
		t.Fatalf("Perms() = %v", out)
	}
	out[0] = "changed"
	if m.Perms()[0] != in[0] {
		t.Fatal("Perms() exposes internal state")
	}
}

func TestAllowsDoesNotAllocate(t *testing.T) {
	m := mustCompile(t,
		"stream.publish:stream:acme/prod/*",
		"stream.*:stream:beta/*/x",
		"cache.read:cache:acme/prod/sessions/user-*",
		"cache.*:cache:acme/dev",
	)
	res := []string{
		StreamResource("acme", "prod", "x"), StreamResource("beta", "a", "x"),
		CacheResource("acme", "prod", "sessions", "admin-1"), CacheResource("acme", "dev", "c", "a/b/c"),
		StreamResource("nobody", "a", "b"),
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, r := range res {
			m.Allows(ActionStreamPublish, r)
			m.Allows(ActionCacheRead, r)
			m.Allows(ActionTenantManage, r)
		}
	})
	if allocs != 0 {
		t.Fatalf("Allows allocates %v times per run", allocs)
	}
}

// naiveGlob is the reference: '*' matches any run, anything else itself.
func naiveGlob(p, s string) bool {
	if p == "" {
		return s == ""
	}
	if p[0] == '*' {
		for i := 0; i <= len(s); i++ {
			if naiveGlob(p[1:], s[i:]) {
				return true
			}
		}
		return false
	}
	return s != "" && s[0] == p[0] && naiveGlob(p[1:], s[1:])
}

// naiveAllows checks every permission against the resource and each of
// its '/'-bounded prefixes, with no indexing or precompilation.
func naiveAllows(perms []string, a Action, res string) bool {
	for _, p := range perms {
		action, pattern, _ := strings.Cut(p, ":")
		if !naiveGlob(action, string(a)) {
			continue
		}
		if naiveGlob(pattern, res) {
			return true
		}
		for i := 0; i < len(res); i++ {
			if res[i] == '/' && naiveGlob(pattern, res[:i]) {
				return true
			}
		}
	}
	return false
}

func randString(r *rand.Rand, alphabet string, min, max int) string {
	n := min + r.IntN(max-min+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func TestGlobAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 50_000 {
		p := randString(r, "ab/*", 0, 7)
		s := randString(r, "ab/*", 0, 9)
		g := compileGlob(p)
		if got, want := g.match(s), naiveGlob(p, s); got != want {
			t.Fatalf("match(%q, %q) = %v, naive %v", p, s, got, want)
		}
		want := naiveAllows([]string{"x:" + p}, "x", s)
		if got := g.matchOrAncestor(s); got != want {
			t.Fatalf("matchOrAncestor(%q, %q) = %v, naive %v", p, s, got, want)
		}
	}
}

func TestMatcherAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	actions := []Action{"a.b", "a.c", "b.b", "a", ""}
	for range 20_000 {
		perms := make([]string, 1+r.IntN(4))
		for i := range perms {
			perms[i] = randString(r, "ab.*", 1, 4) + ":" + randString(r, "ab/:*", 1, 6)
		}
		m := mustCompile(t, perms...)
		for range 8 {
			a := actions[r.IntN(len(actions))]
			res := randString(r, "ab/:*", 0, 10)
			if got, want := m.Allows(a, res), naiveAllows(perms, a, res); got != want {
				t.Fatalf("perms %q: Allows(%q, %q) = %v, naive %v", perms, a, res, got, want)
			}
		}
	}
}

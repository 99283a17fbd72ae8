package auth

import (
	"context"
	"testing"
)

// BenchmarkVerify verifies the same token again and again (the Verifier
// remembers it); BenchmarkVerifyFirstTime verifies one it has not seen.
func BenchmarkVerify(b *testing.B) { benchVerify(b, false) }

func BenchmarkVerifyFirstTime(b *testing.B) { benchVerify(b, true) }

func benchVerify(b *testing.B, fresh bool) {
	f := newFixture(b)
	c := f.claims()
	c.Perms = []string{"stream.publish:stream:acme/prod/*", "cache.*:cache:acme/prod/sessions", "stream.subscribe:stream:acme"}
	tok := f.sign(b, c)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if fresh {
			f.v.recent = verifiedCache{}
		}
		if _, err := f.v.Verify(ctx, tok, "acme"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAllows(b *testing.B) {
	m := mustCompile(b,
		"stream.publish:stream:acme/prod/*",
		"stream.subscribe:stream:acme",
		"cache.read:cache:acme/prod/sessions/user-*",
		"cache.*:cache:acme/dev",
		"tenant.manage:tenant:acme",
	)
	cases := []struct {
		name string
		a    Action
		res  string
	}{
		{"exact-glob", ActionStreamPublish, StreamResource("acme", "prod", "orders")},
		{"ancestor", ActionStreamSubscribe, StreamResource("acme", "prod", "orders")},
		{"wild-action", ActionCacheWrite, CacheResource("acme", "dev", "c", "some/long/key")},
		{"deny", ActionCacheRead, CacheResource("acme", "prod", "sessions", "admin-1/x/y/z")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Allows(c.a, c.res)
			}
		})
	}
}

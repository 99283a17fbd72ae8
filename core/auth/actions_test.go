package auth

import (
	"strings"
	"testing"
	"time"
)

func TestCheckActions(t *testing.T) {
	ok := [][]string{
		{"*:*"},
		{"stream.*:stream:acme/*", "cache.read:cache:acme/p/c/k"},
		{"*.manage:tenant:acme"},
		{"token.create:tenant:acme", "cluster.manage:cluster"},
	}
	for _, perms := range ok {
		if err := CheckActions(perms); err != nil {
			t.Errorf("CheckActions(%q): %v", perms, err)
		}
	}
	bad := []struct {
		perms []string
		want  string
	}{
		{[]string{"stream.pub:stream:acme/*"}, `unknown action "stream.pub"`},
		{[]string{"stream.*:stream:acme/*", "cache.reed:cache:acme/*"}, `permission 1 "cache.reed:cache:acme/*": unknown action`},
		{[]string{"nothing.*:stream:acme/*"}, `unknown action "nothing.*"`},
	}
	for _, tc := range bad {
		err := CheckActions(tc.perms)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckActions(%q) = %v, want %q", tc.perms, err, tc.want)
		}
	}
}

// TestSignRefusesUnknownAction: a typo is never minted into a token.
func TestSignRefusesUnknownAction(t *testing.T) {
	s := NewSigner(mustKey(t))
	_, err := s.Sign(Claims{Subject: "a", TenantID: "acme", Perms: []string{"stream.pub:stream:acme/*"}, Expiry: time.Now().Add(time.Hour)})
	if err == nil || !strings.Contains(err.Error(), "unknown action") {
		t.Fatalf("Sign: %v", err)
	}
}

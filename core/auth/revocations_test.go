package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestRevocationsCoverOnlyOlderTokens(t *testing.T) {
	rs := NewRevocations()
	base := time.Unix(1_800_000_000, 0)
	old := &Identity{TenantID: "acme", Subject: "alice", IssuedAt: base.Add(-time.Second)}
	same := &Identity{TenantID: "acme", Subject: "alice", IssuedAt: base}
	other := &Identity{TenantID: "acme", Subject: "bob", IssuedAt: base.Add(-time.Hour)}
	otherTenant := &Identity{TenantID: "beta", Subject: "alice", IssuedAt: base.Add(-time.Hour)}
	noIat := &Identity{TenantID: "acme", Subject: "alice"}
	rs.Set(wire.Revocation{TenantID: "acme", Subject: "alice", RevokedBefore: base.Unix(), Reason: "left"})
	for _, tc := range []struct {
		name string
		id   *Identity
		want bool
	}{{"older", old, true}, {"issued at revoked_before", same, false}, {"other subject", other, false},
		{"other tenant", otherTenant, false}, {"no iat", noIat, true}} {
		if _, got := rs.Revoked(tc.id); got != tc.want {
			t.Errorf("%s: revoked = %v, want %v", tc.name, got, tc.want)
		}
	}
	e := rs.Check(old)
	if e == nil || e.Code != wire.CodeRevoked || e.Retry != wire.RetryFatal || !strings.Contains(e.Message, "alice") {
		t.Fatalf("Check = %v", e)
	}
	rs.Delete("acme", "alice")
	if _, ok := rs.Revoked(old); ok || rs.Len() != 0 {
		t.Fatal("delete did not lift the revocation")
	}
	var nilSet *Revocations
	if _, ok := nilSet.Revoked(old); ok || nilSet.Check(old) != nil {
		t.Fatal("a nil set revoked something")
	}
}

// Concurrent Set, Revoked and Delete on one set (run under -race, which
// checks the locking): each goroutine reads back exactly what it wrote for
// its own principal, a Delete lifts only that principal, and a revocation
// nobody touches stays in force throughout.
func TestRevocationsConcurrent(t *testing.T) {
	rs := NewRevocations()
	iat := time.Unix(10, 0)
	rs.Set(wire.Revocation{TenantID: "acme", Subject: "shared", RevokedBefore: 11})
	shared := &Identity{TenantID: "acme", Subject: "shared", IssuedAt: iat}
	const workers, rounds = 4, 200
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			id := &Identity{TenantID: "acme", Subject: fmt.Sprint("user-", i), IssuedAt: iat}
			for j := range rounds {
				before := int64(i*rounds + j + 11)
				rs.Set(wire.Revocation{TenantID: "acme", Subject: id.Subject, RevokedBefore: before})
				if r, ok := rs.Revoked(id); !ok || r.RevokedBefore != before {
					t.Errorf("%s round %d: Revoked = %v, %v; want its own revocation of %d", id.Subject, j, r, ok, before)
					return
				}
				rs.Delete("acme", id.Subject)
				if r, ok := rs.Revoked(id); ok {
					t.Errorf("%s round %d: still revoked after Delete: %v", id.Subject, j, r)
					return
				}
				if _, ok := rs.Revoked(shared); !ok {
					t.Errorf("%s round %d: the untouched revocation was lifted", id.Subject, j)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := rs.Len(); n != 1 {
		t.Fatalf("Len = %d after every worker deleted its own, want 1 (the untouched one)", n)
	}
}

func TestVerifyRefusesRevokedToken(t *testing.T) {
	f := newFixture(t)
	rs := NewRevocations()
	f.v = NewVerifier(VerifierOptions{Now: f.clock.Now, Revocations: rs})
	doc, _ := f.signer.JWKS()
	if err := f.v.SetJWKS(doc); err != nil {
		t.Fatal(err)
	}
	old := f.sign(t, f.claims())
	id, err := f.v.Verify(context.Background(), old, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if !id.IssuedAt.Equal(f.clock.Now().Truncate(time.Second)) {
		t.Fatalf("IssuedAt = %v, want %v", id.IssuedAt, f.clock.Now())
	}
	rs.Set(wire.Revocation{TenantID: "acme", Subject: "alice", RevokedBefore: f.clock.Now().Unix() + 1})
	_, err = f.v.Verify(context.Background(), old, "acme")
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeRevoked {
		t.Fatalf("revoked token: err = %v", err)
	}
	f.clock.Advance(2 * time.Second)
	if _, err := f.v.Verify(context.Background(), f.sign(t, f.claims()), "acme"); err != nil {
		t.Fatalf("token issued after revoked_before: %v", err)
	}
}

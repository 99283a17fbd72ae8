package auth

import (
	"context"
	"errors"
	"github.com/felixmq/felix/internal/authtest"
	"testing"

	"github.com/felixmq/felix/wire"
)

// TestExpiryRuleSkewCases: Verify and Expired (the recheck a broker makes
// before each request) agree on every skew.
func TestExpiryRuleSkewCases(t *testing.T) {
	for _, tc := range authtest.Skews(DefaultLeeway) {
		f := newFixture(t)
		c := f.claims()
		tok := f.sign(t, c)
		id, err := f.v.Verify(context.Background(), tok, "acme") // at issue
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(c.Expiry.Sub(f.clock.Now()) + tc.AfterExp)

		_, err = f.v.Verify(context.Background(), tok, "acme")
		if tc.Accepted != (err == nil) {
			t.Errorf("%v after exp: Verify err %v, want accepted=%v", tc.AfterExp, err, tc.Accepted)
		}
		if !tc.Accepted {
			var we *wire.Error
			if !errors.As(err, &we) || we.Reason() != wire.ReasonTokenExpired {
				t.Errorf("%v after exp: %v, want reason %s", tc.AfterExp, err, wire.ReasonTokenExpired)
			}
		}
		if f.v.Expired(id) == tc.Accepted {
			t.Errorf("%v after exp: Expired = %v, want %v", tc.AfterExp, f.v.Expired(id), !tc.Accepted)
		}
	}
}

// TestTenantMismatchHasReason gives the CLI the cause to pick its hint by.
func TestTenantMismatchHasReason(t *testing.T) {
	f := newFixture(t)
	_, err := f.v.Verify(context.Background(), f.sign(t, f.claims()), "other")
	var we *wire.Error
	if !errors.As(err, &we) || we.Reason() != wire.ReasonTenantMismatch {
		t.Fatalf("err %v", err)
	}
}

package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// skewCases are the clock skews the expiry rule is tested with, here and
// (the same list) in the broker's and the control plane's tests: how long
// after the token's exp the verifying host's clock reads, and whether the
// token is still accepted there.
var skewCases = []struct {
	afterExp time.Duration
	accepted bool
}{
	{-time.Second, true},
	{2 * time.Second, true}, // the case issue 15 saw accepted by one side only
	{DefaultLeeway, true},
	{DefaultLeeway + time.Second, false},
	{time.Hour, false},
}

// TestExpiryRuleSkewCases: Verify and Expired (the recheck a broker makes
// before each request) agree on every skew.
func TestExpiryRuleSkewCases(t *testing.T) {
	for _, tc := range skewCases {
		f := newFixture(t)
		c := f.claims()
		tok := f.sign(t, c)
		id, err := f.v.Verify(context.Background(), tok, "acme") // at issue
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(c.Expiry.Sub(f.clock.Now()) + tc.afterExp)

		_, err = f.v.Verify(context.Background(), tok, "acme")
		if tc.accepted != (err == nil) {
			t.Errorf("%v after exp: Verify err %v, want accepted=%v", tc.afterExp, err, tc.accepted)
		}
		if !tc.accepted {
			var we *wire.Error
			if !errors.As(err, &we) || we.Reason() != wire.ReasonTokenExpired {
				t.Errorf("%v after exp: %v, want reason %s", tc.afterExp, err, wire.ReasonTokenExpired)
			}
		}
		if f.v.Expired(id) == tc.accepted {
			t.Errorf("%v after exp: Expired = %v, want %v", tc.afterExp, f.v.Expired(id), !tc.accepted)
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

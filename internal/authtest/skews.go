// Package authtest holds what the tests of the token verifier, the broker
// and the control plane share, so the three are held to one rule. Only
// tests import it.
package authtest

import "time"

// Skew is one case of the expiry rule: how long after a token's exp the
// verifying host's clock reads, and whether the token is still accepted.
type Skew struct {
	AfterExp time.Duration
	Accepted bool
}

// Skews are the cases every side's expiry check is tested with, for a
// verifier allowing leeway past exp.
func Skews(leeway time.Duration) []Skew {
	return []Skew{
		{-time.Second, true},
		{2 * time.Second, true}, // the case issue 15 saw accepted by one side only
		{leeway, true},
		{leeway + time.Second, false},
		{time.Hour, false},
	}
}

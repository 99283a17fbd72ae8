package broker

import (
	"testing"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/internal/authtest"
	"github.com/felixmq/felix/wire"
)

// TestRequestExpiryFollowsVerifierRule: the recheck before each request
// of an authenticated stream applies the verifier's rule, leeway and
// all, the same as the control plane (the skews are core/auth's
// skewCases), so the two accept a token or refuse it together.
func TestRequestExpiryFollowsVerifierRule(t *testing.T) {
	cases := authtest.Skews(auth.DefaultLeeway)
	perms, err := auth.CompilePerms([]string{"*:*"})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Unix(1_800_000_000, 0)
	for _, tc := range cases {
		now := exp.Add(tc.AfterExp)
		v := auth.NewVerifier(auth.VerifierOptions{Now: func() time.Time { return now }})
		cs := &controlStream{srv: &Server{verifier: v}, id: &auth.Identity{TenantID: testTenant, Expiry: exp, Perms: perms}}
		e := cs.authorize(testTenant, auth.ActionStreamPublish, auth.StreamResource(testTenant, "prod", "s"))
		if tc.Accepted != (e == nil) {
			t.Errorf("%v after exp: %v, want accepted=%v", tc.AfterExp, e, tc.Accepted)
		}
		if !tc.Accepted && (e.Code != wire.CodeUnauthorized || e.Reason() != wire.ReasonTokenExpired) {
			t.Errorf("%v after exp: %v, want unauthorized with reason %s", tc.AfterExp, e, wire.ReasonTokenExpired)
		}
	}
}

// TestTenantMismatchRequestHasReason: a request naming another tenant
// than the stream's is forbidden with reason tenant_mismatch.
func TestTenantMismatchRequestHasReason(t *testing.T) {
	perms, _ := auth.CompilePerms([]string{"*:*"})
	v := auth.NewVerifier(auth.VerifierOptions{})
	cs := &controlStream{srv: &Server{verifier: v}, id: &auth.Identity{TenantID: testTenant, Perms: perms}}
	e := cs.authorize("other", auth.ActionStreamPublish, auth.StreamResource("other", "prod", "s"))
	if e == nil || e.Code != wire.CodeForbidden || e.Reason() != wire.ReasonTenantMismatch {
		t.Fatalf("%v", e)
	}
}

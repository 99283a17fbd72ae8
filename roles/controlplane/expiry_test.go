package controlplane

import (
	"github.com/felixmq/felix/internal/authtest"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// TestHTTPExpiryFollowsVerifierRule: the REST API applies the one expiry
// rule the brokers apply (core/auth's skewCases, the same list as the
// broker's test): a token is accepted until exp plus the leeway and
// refused after it, with reason token_expired.
func TestHTTPExpiryFollowsVerifierRule(t *testing.T) {
	cases := authtest.Skews(auth.DefaultLeeway)
	var skew atomic.Int64 // how far the service's clock runs ahead of time.Now
	base := time.Now().Truncate(time.Second)
	now := func() time.Time { return base.Add(time.Duration(skew.Load())) }
	store := openTestRaft(t, t.TempDir())
	svc, err := New(Config{Logger: quietLogger(), Now: now}, store)
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	if _, err := svc.Bootstrap(bg); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, svc: svc, srv: httptest.NewServer(svc.Handler())}
	t.Cleanup(func() {
		h.srv.Close()
		h.svc.Close()
	})
	exp := base.Add(time.Minute)
	tok, err := svc.MintToken(auth.Claims{Subject: "s", TenantID: "default", Perms: []string{"*:*"}, IssuedAt: base, Expiry: exp})
	must(t, err)
	for _, tc := range cases {
		skew.Store(int64(exp.Add(tc.AfterExp).Sub(base)))
		if tc.Accepted {
			h.expect(200, "GET", "/v1/tenants/default/namespaces", tok, nil, nil)
			continue
		}
		var e errorBody
		h.expect(401, "GET", "/v1/tenants/default/namespaces", tok, nil, &e)
		if e.Error.Code != wire.CodeUnauthorized || e.Error.Detail[wire.DetailReason] != wire.ReasonTokenExpired {
			t.Errorf("%v after exp: %+v, want unauthorized with reason %s", tc.AfterExp, e.Error, wire.ReasonTokenExpired)
		}
	}
}

package broker

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

var userPerms = []string{"stream.*:stream:acme/prod/*", "cache.*:cache:acme/prod/*"}

// authAs opens a stream on qc authenticated with token, failing on refusal.
func (e *env) authAs(qc transport.Conn, token string) *tstream {
	e.t.Helper()
	s := openStream(e.t, qc)
	if m := s.auth(testTenant, token, 0, allFeatures); m.MessageType() != "auth_ok" {
		e.t.Fatalf("auth refused: %#v", m)
	}
	return s
}

// expectErrorEnd reads s's event stream until its last frame, which
// must be an error with code, and then its end.
func (s *tsub) expectErrorEnd(code wire.Code) {
	s.t.Helper()
	for {
		f, err := s.next()
		if err != nil {
			s.t.Fatalf("event stream ended without an error frame: %v", err)
		}
		if f.Flags != 0 {
			continue // events published before the revocation
		}
		m, err := wire.ParseMessage(f.Payload)
		if err != nil {
			s.t.Fatal(err)
		}
		if _, ok := m.(*wire.EventBatch); ok {
			continue
		}
		expectCode(s.t, m, code)
		break
	}
	if _, err := s.next(); err != io.EOF {
		s.t.Fatalf("event stream after the error: %v, want EOF", err)
	}
}

func TestRevocationEndsOnlyThatPrincipalsStreams(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
	issued := time.Now().Add(-time.Hour)
	exp := time.Now().Add(time.Hour)
	aliceTok := e.tokenAs("alice", testTenant, issued, exp, userPerms...)
	bobTok := e.tokenAs("bob", testTenant, issued, exp, userPerms...)

	qc := e.dial(0)
	alice := e.authAs(qc, aliceTok)
	bob := e.authAs(qc, bobTok)
	aliceSub := e.subscribe(qc, alice, "events")
	bobSub := e.subscribe(qc, bob, "events")
	alicePub := e.authAs(qc, aliceTok) // a publish stream of alice's
	aliceIngress := openIngress(t, qc, authFrame(testTenant, aliceTok), binPublish("events", false, 0, numbered(0)))
	pub := e.authed(qc, 0, allFeatures, "*:*")

	aliceSub.payloads(1) // alice's fire-and-forget publish
	bobSub.payloads(1)

	before := e.metric("felix_broker_revoked_streams_total")
	revokedBefore := time.Now().Unix()
	e.src.revoke(wire.Revocation{TenantID: testTenant, Subject: "alice", RevokedBefore: revokedBefore, Reason: "left"})

	aliceSub.expectErrorEnd(wire.CodeRevoked)
	e1 := expectCode(t, alice.recv(), wire.CodeRevoked)
	if !strings.Contains(e1.Message, "alice") || e1.Retry != wire.RetryFatal {
		t.Fatalf("revocation error %v", e1)
	}
	alice.expectEnd()
	expectCode(t, alicePub.recv(), wire.CodeRevoked)
	alicePub.expectEnd()
	select {
	case <-aliceIngress.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("alice's ingress stream was not refused")
	}
	var se *transport.StreamError
	if err := context.Cause(aliceIngress.Context()); !errors.As(err, &se) || se.Code != transport.StreamErrorCode(wire.CloseRefused) {
		t.Fatalf("alice's ingress stream ended with %v", err)
	}
	// Each stream is counted just after it is ended, so the last one's
	// count may trail its end a little.
	waitFor(t, "felix_broker_revoked_streams_total to count alice's four streams", func() bool {
		return e.metric("felix_broker_revoked_streams_total")-before >= 4
	})

	// Bob's streams on the same connection keep working.
	pub.write(binPublish("events", false, 0, numbered(1)))
	if got := bobSub.payloads(1); string(got[0]) != string(numbered(1)) {
		t.Fatalf("bob got %q", got)
	}
	bob.write(binPublish("events", true, 7, numbered(2)))
	if _, ok := bob.recv().(*wire.PublishOK); !ok {
		t.Fatal("bob's publish was not acknowledged")
	}
	bobSub.payloads(1)

	// Alice's old token is refused; one issued at revoked_before works.
	s := openStream(t, qc)
	expectCode(t, s.auth(testTenant, aliceTok, 0, allFeatures), wire.CodeRevoked)
	s.expectEnd()
	fresh := e.tokenAs("alice", testTenant, time.Unix(revokedBefore, 0), exp, userPerms...)
	again := e.authAs(qc, fresh)
	sub := e.subscribe(qc, again, "events")
	pub.write(binPublish("events", false, 0, numbered(3)))
	sub.payloads(1)
}

func TestRevokedTokenRefusedAtAuth(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
	tok := e.tokenAs("carol", testTenant, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), userPerms...)
	e.src.revoke(wire.Revocation{TenantID: testTenant, Subject: "carol", RevokedBefore: time.Now().Unix()})
	waitFor(t, "the revocation to reach the broker", func() bool { return e.srv.revs.Len() > 0 })
	qc := e.dial(0)
	s := openStream(t, qc)
	em := expectCode(t, s.auth(testTenant, tok, 0, allFeatures), wire.CodeRevoked)
	if em.Retry != wire.RetryFatal || !strings.Contains(em.Message, "carol") {
		t.Fatalf("refusal %v", em)
	}
	s.expectEnd()
}

// A token that expires stops its stream's new requests, but a subscription
// opened before keeps delivering: expiry stops new work, revocation ends
// open streams. The broker's clock is moved past exp plus the leeway.
func TestExpiredTokenKeepsOpenSubscriptions(t *testing.T) {
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	e := startEnvClock(t, testConfig(), nil, now, wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	tok := e.tokenAs("dave", testTenant, time.Now().Add(-time.Minute), time.Now().Add(time.Minute), userPerms...)
	s := e.authAs(qc, tok)
	sub := e.subscribe(qc, s, "events")
	ahead.Store(int64(time.Minute + auth.DefaultLeeway + time.Second))
	s.send(&wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "events"})
	if em := expectCode(t, s.recv(), wire.CodeUnauthorized); em.Message != "token expired" {
		t.Fatalf("a request after expiry: %v", em)
	}
	pub := e.authed(qc, 0, allFeatures, userPerms...)
	pub.write(binPublish("events", false, 0, numbered(0)))
	checkOrder(t, sub.payloads(1), 1)
}

func TestControlPlaneWithoutRevocationsKeepsSyncing(t *testing.T) {
	e := startEnvWith(t, testConfig(), func(f *fakeSource) { f.revUnknown = true }, wire.StreamSpec{Stream: "events"})
	rec := httptest.NewRecorder()
	e.srv.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/ready", nil))
	if rec.Code != 200 {
		t.Fatalf("/ready = %d", rec.Code)
	}
	n := e.src.tenantPasses()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for e.src.tenantPasses() < n+2 {
		if ctx.Err() != nil {
			t.Fatal("the catalog sync stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, userPerms...)
	e.subscribe(qc, s, "events")
}

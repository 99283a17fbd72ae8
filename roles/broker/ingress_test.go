package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// openIngress opens a client uni stream and writes frames on it.
func openIngress(t *testing.T, qc transport.Conn, frames ...[]byte) transport.SendStream {
	t.Helper()
	st, err := qc.OpenUniStreamSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if _, err := st.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func authFrame(tenant, token string) []byte {
	b, _ := wire.AppendMessageFrame(nil, &wire.Auth{TenantID: tenant, Token: token})
	return b
}

func TestIngressStream(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	sub := e.subscribe(qc, e.authed(qc, 0, allFeatures, pubAll), "events")

	// Without auth the stream is refused and nothing is published.
	bad := openIngress(t, qc, binPublish("events", false, 0, []byte("unauthenticated")))
	select {
	case <-bad.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("an unauthenticated ingress stream was not refused")
	}
	var se *transport.StreamError
	if err := context.Cause(bad.Context()); !errors.As(err, &se) || se.Code != transport.StreamErrorCode(wire.CloseRefused) {
		t.Fatalf("refused with %v", err)
	}

	jsonPub, _ := wire.AppendMessageFrame(nil, &wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "events", Payload: numbered(1)})
	good := openIngress(t, qc, authFrame(testTenant, e.token(pubAll)),
		binPublish("events", false, 0, numbered(0)), jsonPub,
		binPublish("events", true, 5, numbered(2))) // the ack flag is ignored here
	good.Close()
	checkOrder(t, sub.payloads(3), 3)
}

func TestIngressWaitIsLossless(t *testing.T) {
	cfg := testConfig()
	cfg.PubIngressWait = true
	cfg.Core.SubQueueCapacity = 2
	cfg.PublishLaneDepth = 2
	e := startEnv(t, cfg, wire.StreamSpec{Stream: "blocky", SubQueuePolicy: "block"})
	subConn := e.dial(16 << 10)
	sub := e.subscribe(subConn, e.authed(subConn, wire.FlagBinaryEventBatchShared, allFeatures, pubAll), "blocky")
	dropped := e.metric("felix_broker_ingress_dropped_total")

	const n, size = 200, 4 << 10
	pub := e.authed(e.dial(0), 0, allFeatures, pubAll)
	wrote := make(chan error, 1)
	go func() {
		var frames []byte
		for i := 0; i < n; i++ {
			frames = append(frames, binPublish("blocky", false, 0, padded(i, size))...)
		}
		_, err := pub.st.Write(frames)
		wrote <- err
	}()
	got := sub.payloads(n)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	for i, p := range got {
		if string(p) != string(padded(i, size)) {
			t.Fatalf("payload %d out of order or lost", i)
		}
	}
	if d := e.metric("felix_broker_ingress_dropped_total") - dropped; d != 0 {
		t.Fatalf("%v fire-and-forget publishes dropped", d)
	}
}

func TestStreamDeletedEndsSubscription(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	sub := e.subscribe(qc, e.authed(qc, 0, allFeatures, pubAll), "events")
	e.srv.state.RemoveStream(wire.StreamSpec{TenantID: testTenant, Namespace: "prod", Stream: "events"})
	f := sub.frame()
	m, err := wire.ParseMessage(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, m, wire.CodeNotFound)
	sub.rs.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := sub.fr.Next(); err == nil {
		t.Fatal("event stream still open")
	}
}

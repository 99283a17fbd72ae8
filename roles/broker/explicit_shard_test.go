package broker

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

// TestExplicitShardPublish: a JSON publish naming a shard lands on that
// shard, whatever a key would pick; one naming a shard the stream does
// not have is refused (a_shard_out_of_range_is_refused), never wrapped;
// and the broker advertises FEATURE_EXPLICIT_SHARD.
func TestExplicitShardPublish(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "wide", Shards: 4})
	if e.srv.serverFeatures()&wire.FeatureExplicitShard == 0 {
		t.Fatal("FEATURE_EXPLICIT_SHARD not advertised")
	}
	qc := e.dial(0)
	subs := e.authed(qc, 0, allFeatures, pubAll)
	two := uint32(2)
	sub, _ := e.subscribeWith(qc, subs, &wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "wide", Shard: &two})
	pub := e.authed(qc, 0, allFeatures, pubAll)
	pub.send(&wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "wide", Payload: []byte("to-two"), Shard: &two, RequestID: 1, Ack: wire.AckPerMessage})
	if _, ok := pub.recv().(*wire.PublishOK); !ok {
		t.Fatal("explicit-shard publish not acknowledged")
	}
	if got := sub.payloads(1); string(got[0]) != "to-two" {
		t.Fatalf("shard 2 got %q", got)
	}
	nine := uint32(9)
	pub.send(&wire.PublishBatch{TenantID: testTenant, Namespace: "prod", Stream: "wide", Payloads: [][]byte{[]byte("x")}, Shard: &nine, RequestID: 2, Ack: wire.AckPerMessage})
	we := expectCode(t, pub.recv(), wire.CodeInvalidRequest)
	if we.Reason() != wire.ReasonShardOutOfRange {
		t.Fatalf("out-of-range shard refused with %v", we.Detail)
	}
}

package wire

import (
	"errors"
	"testing"
)

// The commit and state messages have the shapes docs/protocol.md gives.
func TestCommitShapes(t *testing.T) {
	for _, c := range []struct {
		m    Message
		want string
	}{
		{&Commit{TenantID: "acme", Namespace: "orders", Stream: "order-events", EntityKey: []byte("k"), Ops: []CommitOp{
			{Op: CommitOpEnqueue, Payload: []byte("e")}, {Op: CommitOpPut, Key: "order-42", Value: []byte("v")}}, RequestID: 3},
			`{"type":"commit","tenant_id":"acme","namespace":"orders","stream":"order-events","entity_key":"aw==","ops":[{"op":"enqueue","payload":"ZQ=="},{"op":"put","key":"order-42","value":"dg=="}],"request_id":3}`},
		{&StateGet{TenantID: "acme", Namespace: "orders", Stream: "order-events", Shard: u32p(1), Key: "order-42", RequestID: 4},
			`{"type":"state_get","tenant_id":"acme","namespace":"orders","stream":"order-events","shard":1,"key":"order-42","request_id":4}`},
		{&StateValue{RequestID: 4, Key: "order-42", Value: []byte("v"), Version: u64p(17)}, `{"type":"state_value","request_id":4,"key":"order-42","value":"dg==","version":17}`},
		{&StateValue{RequestID: 4, Key: "order-42"}, `{"type":"state_value","request_id":4,"key":"order-42","value":null}`},
	} {
		b, err := MarshalMessage(c.m)
		if err != nil || string(b) != c.want {
			t.Errorf("%T: %s %v\nwant %s", c.m, b, err, c.want)
		}
	}
}

// A commit validates only with exactly one event, known ops with keys,
// and every op on its own stream (the index of one that is not).
func TestCommitValidate(t *testing.T) {
	ev := CommitOp{Op: CommitOpPublish, Payload: []byte("e")}
	base := func(ops ...CommitOp) *Commit {
		return &Commit{TenantID: "t", Namespace: "n", Stream: "s", Ops: ops, RequestID: 1}
	}
	if err := base(ev, CommitOp{Op: CommitOpPut, Key: "k", Value: []byte("v")}).Validate(); err != nil {
		t.Fatal(err)
	}
	reason := func(err error) any {
		var e *Error
		if !errors.As(err, &e) {
			return nil
		}
		return e.Detail[DetailReason]
	}
	if r := reason(base(CommitOp{Op: CommitOpPut, Key: "k"}).Validate()); r != ReasonEventCount {
		t.Fatalf("no event: %v", r)
	}
	if r := reason(base(ev, ev).Validate()); r != ReasonEventCount {
		t.Fatalf("two events: %v", r)
	}
	err := base(ev, CommitOp{Op: CommitOpPut, Stream: "other", Key: "k"}).Validate()
	var e *Error
	if !errors.As(err, &e) || e.Detail[DetailReason] != ReasonNotOnOwningShard || e.Detail["index"] != 1 {
		t.Fatalf("other stream: %v", err)
	}
	for _, bad := range []*Commit{base(ev, CommitOp{Op: CommitOpDelete}), base(ev, CommitOp{Op: "merge", Key: "k"}),
		{TenantID: "t", Namespace: "n", Stream: "s", Ops: []CommitOp{ev}, Shard: u32p(1), EntityKey: []byte("k")}} {
		if bad.Validate() == nil {
			t.Fatalf("%+v validated", bad)
		}
	}
	if (&StateGet{TenantID: "t", Namespace: "n", Stream: "s"}).Validate() == nil {
		t.Fatal("state_get without a key validated")
	}
}

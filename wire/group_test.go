package wire

import (
	"testing"
)

func groupScope() GroupScope {
	return GroupScope{TenantID: "acme", Namespace: "prod", Stream: "jobs", Shard: 0, Group: "fulfilment"}
}

// groupSamples are one valid message of every group type, for the
// round-trip, frame and fuzz-seed tests.
func groupSamples() []Message {
	s := groupScope()
	return []Message{
		&GroupPoll{GroupScope: s, MaxRecords: 32, WaitMS: 5000, RequestID: 1},
		&GroupPoll{GroupScope: s, MaxRecords: 1, VisibilityMS: u64p(300000), RequestID: 2},
		&GroupRecords{Records: []GroupRecord{{Offset: 41, Payload: []byte("x"), Attempts: 1}, {Offset: 42, Payload: []byte{}, Attempts: 3, Publisher: "svc", TimestampMicros: 1767225600000000}}, RequestID: 1},
		&GroupRecords{Records: []GroupRecord{}, RequestID: 2},
		&GroupAck{GroupScope: s, Offset: u64p(41), RequestID: 2},
		&GroupNack{GroupScope: s, Offset: u64p(41), RequestID: 3},
		&GroupNack{GroupScope: s, Offset: u64p(41), Attempts: u32p(1), DelayMS: u64p(30000), RequestID: 10},
		&GroupExtend{GroupScope: s, Offset: u64p(41), Attempts: u32p(1), ExtendMS: 60000, RequestID: 9},
		&GroupExtended{VisibleMS: 60000, RequestID: 9},
		&GroupDeadLetter{GroupScope: s, Offset: u64p(41), RequestID: 11},
		&GroupDeadLetters{GroupScope: s, RequestID: 3},
		&GroupDeadLetterList{Offsets: []uint64{37}, RequestID: 3},
		&GroupDiscard{GroupScope: s, Offset: u64p(37), RequestID: 4},
		&GroupRedrive{GroupScope: s, Offset: u64p(37), RequestID: 5},
		&GroupSeek{GroupScope: s, Start: &GroupSeekStart{Latest: true}, IfNew: true, RequestID: 6},
		&GroupSeek{GroupScope: s, Start: &GroupSeekStart{Earliest: true}, RequestID: 6},
		&GroupSeek{GroupScope: s, Start: &GroupSeekStart{Offset: 118}, RequestID: 6},
		&GroupPosition{Offset: 118, Moved: true, RequestID: 6},
		&GroupDescribe{GroupScope: s, RequestID: 7},
		&GroupInfo{Committed: u64p(118), Tail: 130, InFlight: 4, Owed: 1, RequestID: 7},
		&GroupInfo{Tail: 130, RequestID: 7},
		&GroupDelete{GroupScope: s, RequestID: 8},
		&GroupDeleted{Existed: true, RequestID: 8},
	}
}

// The spec's examples parse to what they say and validate.
func TestGroupSpecShapes(t *testing.T) {
	for _, c := range []struct {
		json string
		want string
	}{
		{`{"type":"group_poll","tenant_id":"acme","namespace":"prod","stream":"jobs","shard":0,"group":"fulfilment","max_records":32,"wait_ms":5000,"request_id":1}`, ""},
		{`{"type":"group_ack","tenant_id":"acme","namespace":"prod","stream":"jobs","shard":0,"group":"fulfilment","offset":41,"request_id":2}`, ""},
		{`{"type":"group_nack","tenant_id":"acme","namespace":"prod","stream":"jobs","shard":0,"group":"fulfilment","offset":41,"delay_ms":30000,"attempts":1,"request_id":10}`, ""},
		{`{"type":"group_extend","tenant_id":"acme","namespace":"prod","stream":"jobs","shard":0,"group":"fulfilment","offset":41,"attempts":1,"extend_ms":60000,"request_id":9}`, ""},
		{`{"type":"group_seek","tenant_id":"acme","namespace":"prod","stream":"jobs","shard":0,"group":"fulfilment","start":"latest","if_new":true,"request_id":6}`, ""},
		{`{"type":"group_seek","tenant_id":"acme","namespace":"prod","stream":"jobs","shard":0,"group":"fulfilment","start":{"offset":5},"request_id":6}`, ""},
		{`{"type":"group_records","records":[{"offset":41,"payload":"eA==","attempts":1}],"request_id":1}`, ""},
		{`{"type":"group_info","committed":118,"tail":130,"in_flight":4,"owed":1,"dead_letters":0,"request_id":7}`, ""},
	} {
		m, err := ParseMessage([]byte(c.json))
		if err != nil {
			t.Fatalf("%s: %v", c.json, err)
		}
		if v, ok := m.(Validator); ok {
			if err := v.Validate(); err != nil {
				t.Fatalf("%s does not validate: %v", c.json, err)
			}
		}
		b, err := MarshalMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseMessage(b)
		if err != nil || back.MessageType() != m.MessageType() {
			t.Fatalf("%s: round trip %s: %v", c.json, b, err)
		}
	}
	m, _ := ParseMessage([]byte(`{"type":"group_seek","start":{"offset":5}}`))
	if s := m.(*GroupSeek); s.Start == nil || s.Start.Offset != 5 || s.Start.Latest || s.Start.Earliest {
		t.Fatalf("start parsed as %+v", s.Start)
	}
	b, _ := MarshalMessage(&GroupInfo{Tail: 3})
	if string(b) != `{"type":"group_info","tail":3,"in_flight":0,"owed":0,"dead_letters":0,"request_id":0}` {
		t.Fatalf("group_info without a cursor: %s", b)
	}
}

func TestGroupValidate(t *testing.T) {
	s := groupScope()
	for name, m := range map[string]Validator{
		"poll without group":  &GroupPoll{GroupScope: GroupScope{TenantID: "a", Namespace: "b", Stream: "c"}, MaxRecords: 1},
		"poll of nothing":     &GroupPoll{GroupScope: s},
		"ack without offset":  &GroupAck{GroupScope: s},
		"nack without offset": &GroupNack{GroupScope: s},
		"seek without start":  &GroupSeek{GroupScope: s},
		"group with newline":  &GroupDescribe{GroupScope: GroupScope{TenantID: "a", Namespace: "b", Stream: "c", Group: "x\ny"}},
	} {
		t.Run(name, func(t *testing.T) { wantInvalid(t, m.Validate()) })
	}
	for _, bad := range []string{`{"type":"group_seek","start":"middle"}`, `{"type":"group_seek","start":{"x":1}}`, `{"type":"group_seek","start":{"offset":-1}}`} {
		if _, err := ParseMessage([]byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

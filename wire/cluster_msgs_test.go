package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// clusterTypes lists every cluster message type of the spec's "Cluster
// Operations" and "Other Messages" sections that this package decodes.
var clusterTypes = []string{"topology", "topology_view", "not_leader", "stream_shards",
	"stream_shards_view", "cache_shards", "cache_shards_view", "shard_owners",
	"shard_owners_view", "shard_moved", "publish_width"}

// clusterSamples returns values of every cluster message type, with every
// optional field both set and unset somewhere in the list.
func clusterSamples() []Message {
	return []Message{
		&Topology{},
		&Topology{RequestID: u64p(5)},
		&TopologyView{Brokers: []TopologyBroker{{NodeID: "broker-1", Addr: "10.0.0.5:5000"}, {NodeID: "broker-2", Addr: "10.0.0.6:5000", TCPAddr: "10.0.0.6:5443"}}, RequestID: u64p(5)},
		&TopologyView{Brokers: []TopologyBroker{}},
		&NotLeader{NodeID: "broker-2", Addr: "10.0.0.6:5000", Generation: 7},
		&NotLeader{NodeID: "broker-2", Addr: "10.0.0.6:5000", Generation: 1<<64 - 1, RequestID: u64p(12)},
		&StreamShards{TenantID: "acme", Namespace: "prod", Stream: "orders", RequestID: 1},
		&StreamShardsView{Shards: 4, RequestID: 1, Routing: RoutingJumpHash},
		&StreamShardsView{Shards: 0, RequestID: 2},
		&CacheShards{TenantID: "acme", Namespace: "prod", Cache: "sessions", RequestID: 2},
		&CacheShardsView{Shards: 4, RequestID: 2},
		&ShardOwners{TenantID: "acme", Namespace: "prod", Name: "orders", Kind: ShardKindStream, RequestID: 3},
		&ShardOwners{TenantID: "acme", Namespace: "prod", Name: "sessions", Kind: ShardKindCache, RequestID: 4},
		&ShardOwnersView{RequestID: 3, Owners: []ShardOwner{
			{Shard: 0, NodeID: "broker-2", Addr: "10.0.0.6:5000", Generation: 4},
			{Shard: 1, Generation: 0, Unavailable: OwnerNotAssigned}}},
		&ShardOwnersView{RequestID: 4, Owners: []ShardOwner{{Shard: 0}}},
		&ShardOwnersView{RequestID: 5, Owners: []ShardOwner{}},
		&ShardMoved{SubscriptionID: 7, Shard: 2, NodeID: "broker-3", Addr: "10.0.0.7:5000", Generation: 5, ResumeFrom: u64p(48212)},
		&ShardMoved{SubscriptionID: 8, Generation: 6},
		&PublishWidth{TenantID: "acme", Namespace: "prod", Stream: "orders", Width: 4},
	}
}

func TestClusterMessagesRoundTrip(t *testing.T) {
	for _, m := range clusterSamples() {
		b, err := MarshalMessage(m)
		if err != nil {
			t.Fatalf("%s: marshal: %v", m.MessageType(), err)
		}
		if !bytes.HasPrefix(b, []byte(`{"type":"`+m.MessageType()+`"`)) || !json.Valid(b) {
			t.Fatalf("%s: bad encoding %s", m.MessageType(), b)
		}
		got, err := ParseMessage(b)
		if err != nil {
			t.Fatalf("%s: parse %s: %v", m.MessageType(), b, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: round trip of %s\n got  %#v\n want %#v", m.MessageType(), b, got, m)
		}
		frame, err := AppendMessageFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		f, err := NewFrameReader(bytes.NewReader(frame), 0).Next()
		if err != nil || f.Flags != 0 || !bytes.Equal(f.Payload, b) {
			t.Errorf("%s: frame %+v, %v", m.MessageType(), f, err)
		}
		if v, ok := m.(Validator); ok {
			if err := v.Validate(); err != nil {
				t.Errorf("%s: sample %s does not validate: %v", m.MessageType(), b, err)
			}
		}
	}
}

func TestEveryClusterMessageTypeIsRegisteredAndSampled(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range clusterSamples() {
		seen[m.MessageType()] = true
	}
	for _, typ := range clusterTypes {
		if !seen[typ] {
			t.Errorf("no sample of %q", typ)
		}
		if m := newMessage(typ); m == nil || m.MessageType() != typ {
			t.Errorf("newMessage(%q) = %v", typ, m)
		}
	}
	if len(seen) != len(clusterTypes) {
		t.Errorf("sampled %d types, the list has %d", len(seen), len(clusterTypes))
	}
	if m, err := ParseMessage([]byte(`{"type":"frobnicate_view"}`)); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*Unknown); !ok {
		t.Errorf("an unregistered type parsed as %T, want *Unknown", m)
	}
}

// specGolden are the examples of api-reference.md, "Cluster Operations",
// as the spec prints them, with the value each must decode to.
var specGolden = []struct {
	json string
	want Message
}{
	{`{ "type": "topology" }`, &Topology{}},
	{`{ "type": "topology_view", "brokers": [{ "node_id": "broker-1", "addr": "..." }] }`,
		&TopologyView{Brokers: []TopologyBroker{{NodeID: "broker-1", Addr: "..."}}}},
	{`{ "type": "not_leader", "node_id": "broker-2", "addr": "...", "generation": 7 }`,
		&NotLeader{NodeID: "broker-2", Addr: "...", Generation: 7}},
	{`{ "type": "stream_shards", "tenant_id": "acme", "namespace": "prod",
  "stream": "orders", "request_id": 1 }`,
		&StreamShards{TenantID: "acme", Namespace: "prod", Stream: "orders", RequestID: 1}},
	{`{ "type": "stream_shards_view", "shards": 4, "request_id": 1,
  "routing": "jump_hash" }`,
		&StreamShardsView{Shards: 4, RequestID: 1, Routing: RoutingJumpHash}},
	{`{ "type": "cache_shards", "tenant_id": "acme", "namespace": "prod",
  "cache": "sessions", "request_id": 2 }`,
		&CacheShards{TenantID: "acme", Namespace: "prod", Cache: "sessions", RequestID: 2}},
	{`{ "type": "cache_shards_view", "shards": 4, "request_id": 2 }`,
		&CacheShardsView{Shards: 4, RequestID: 2}},
	{`{ "type": "shard_owners", "tenant_id": "acme", "namespace": "prod",
  "name": "orders", "kind": "stream", "request_id": 3 }`,
		&ShardOwners{TenantID: "acme", Namespace: "prod", Name: "orders", Kind: ShardKindStream, RequestID: 3}},
	{`{ "type": "shard_owners_view", "request_id": 3, "owners": [
  { "shard": 0, "node_id": "broker-2", "addr": "10.0.0.6:5000", "generation": 4 },
  { "shard": 1, "generation": 0, "unavailable": "not_assigned" } ] }`,
		&ShardOwnersView{RequestID: 3, Owners: []ShardOwner{
			{Shard: 0, NodeID: "broker-2", Addr: "10.0.0.6:5000", Generation: 4},
			{Shard: 1, Generation: 0, Unavailable: OwnerNotAssigned}}}},
}

// TestClusterSpecGolden decodes each of the spec's examples to the value
// it shows, and encodes that value back to the example itself (member
// order included, whitespace aside).
func TestClusterSpecGolden(t *testing.T) {
	for _, g := range specGolden {
		m, err := ParseMessage([]byte(g.json))
		if err != nil {
			t.Fatalf("%s: %v", g.json, err)
		}
		if !reflect.DeepEqual(m, g.want) {
			t.Errorf("%s decodes to %#v, want %#v", g.json, m, g.want)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(g.json)); err != nil {
			t.Fatal(err)
		}
		enc, err := MarshalMessage(g.want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, compact.Bytes()) {
			t.Errorf("encoding\n got  %s\n want %s", enc, compact.Bytes())
		}
	}
}

// TestClusterPinnedShapes fixes the encodings docs/protocol.md pins where
// the spec names a message or member without showing it.
func TestClusterPinnedShapes(t *testing.T) {
	for _, c := range []struct {
		m    Message
		want string
	}{
		{&ShardMoved{SubscriptionID: 7, Shard: 2, NodeID: "broker-3", Addr: "10.0.0.7:5000", Generation: 5, ResumeFrom: u64p(48212)},
			`{"type":"shard_moved","subscription_id":7,"shard":2,"node_id":"broker-3","addr":"10.0.0.7:5000","generation":5,"resume_from":48212}`},
		{&ShardMoved{SubscriptionID: 8, Shard: 0, Generation: 6},
			`{"type":"shard_moved","subscription_id":8,"shard":0,"generation":6}`},
		{&PublishWidth{TenantID: "acme", Namespace: "prod", Stream: "orders", Width: 4},
			`{"type":"publish_width","tenant_id":"acme","namespace":"prod","stream":"orders","width":4}`},
		{&Topology{RequestID: u64p(9)}, `{"type":"topology","request_id":9}`},
		{&TopologyView{}, `{"type":"topology_view","brokers":[]}`},
		{&ShardOwnersView{RequestID: 1}, `{"type":"shard_owners_view","request_id":1,"owners":[]}`},
		{&ShardOwnersView{RequestID: 1, Owners: []ShardOwner{{Shard: 0}}},
			`{"type":"shard_owners_view","request_id":1,"owners":[{"shard":0,"generation":0}]}`},
		{&StreamShardsView{Shards: 2, RequestID: 4}, `{"type":"stream_shards_view","shards":2,"request_id":4}`},
		{&Publish{TenantID: "acme", Namespace: "city", Stream: "ticks", Payload: []byte("t"), Shard: u32p(2)},
			`{"type":"publish","tenant_id":"acme","namespace":"city","stream":"ticks","payload":"dA==","shard":2}`},
	} {
		got, err := MarshalMessage(c.m)
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got  %s (%v)\n want %s", c.m.MessageType(), got, err, c.want)
		}
	}
}

func TestClusterEmptyListsDecodeEmpty(t *testing.T) {
	for _, raw := range []string{`{"type":"topology_view"}`, `{"type":"topology_view","brokers":null}`} {
		m, err := ParseMessage([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if v := m.(*TopologyView); v.Brokers == nil || len(v.Brokers) != 0 {
			t.Errorf("%s: brokers %#v, want empty", raw, v.Brokers)
		}
	}
	m, err := ParseMessage([]byte(`{"type":"shard_owners_view","request_id":2,"owners":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if v := m.(*ShardOwnersView); v.Owners == nil || v.RequestID != 2 {
		t.Errorf("owners %#v request %d", v.Owners, v.RequestID)
	}
}

func TestClusterBadShapesAreInvalid(t *testing.T) {
	for _, raw := range []string{
		`{"type":"topology_view","brokers":5}`,
		`{"type":"topology_view","brokers":[{"node_id":1}]}`,
		`{"type":"shard_owners_view","owners":{}}`,
		`{"type":"shard_owners_view","owners":[{"shard":-1}]}`,
		`{"type":"shard_owners_view","owners":[{"shard":4294967296}]}`,
		`{"type":"not_leader","generation":"7"}`,
		`{"type":"stream_shards_view","shards":1.5}`,
		`{"type":"publish_width","width":-4}`,
		`{"type":"shard_moved","resume_from":"x"}`,
		`{"type":"publish","shard":-1}`,
	} {
		_, err := ParseMessage([]byte(raw))
		if err == nil {
			t.Errorf("%s: parsed", raw)
			continue
		}
		wantInvalid(t, err)
	}
}

func TestClusterValidate(t *testing.T) {
	for _, c := range []struct {
		m    Validator
		want string // "" means valid; else a substring of the error
	}{
		{&TopologyView{Brokers: []TopologyBroker{{NodeID: "b1"}}}, "lacks node_id or addr"},
		{&TopologyView{Brokers: []TopologyBroker{{Addr: "a:1"}}}, "lacks node_id or addr"},
		{&TopologyView{Brokers: []TopologyBroker{{NodeID: "b1", Addr: "a:1"}, {NodeID: "b1", Addr: "a:2"}}}, "listed twice"},
		{&NotLeader{Addr: "a:1", Generation: 3}, "missing field node_id"},
		{&NotLeader{NodeID: "b2", Generation: 3}, "missing field addr"},
		{&StreamShards{TenantID: "a", Namespace: "b"}, "missing field stream"},
		{&StreamShardsView{Shards: 4, Routing: "ring"}, `unknown routing "ring"`},
		{&StreamShardsView{Shards: 0}, ""},
		{&CacheShards{TenantID: "a", Namespace: "b"}, "missing field cache"},
		{&ShardOwners{TenantID: "a", Namespace: "b", Name: "c"}, "missing field kind"},
		{&ShardOwners{TenantID: "a", Namespace: "b", Name: "c", Kind: "queue"}, `kind "queue"`},
		{&ShardOwners{Namespace: "b", Name: "c", Kind: ShardKindStream}, "missing field tenant_id"},
		{&ShardOwnersView{Owners: []ShardOwner{{Shard: 1}}}, "entry 0 is for shard 1"},
		{&ShardOwnersView{Owners: []ShardOwner{{Shard: 0, NodeID: "b", Addr: "a:1", Unavailable: "not_assigned"}}}, "both node_id and unavailable"},
		{&ShardOwnersView{Owners: []ShardOwner{{Shard: 0, NodeID: "b"}}}, "node_id but no addr"},
		{&ShardOwnersView{Owners: []ShardOwner{{Shard: 0, Addr: "a:1"}}}, "addr but no node_id"},
		{&ShardOwnersView{Owners: []ShardOwner{{Shard: 0, Unavailable: "some_future_reason"}}}, ""},
		{&ShardMoved{Addr: "a:1"}, "addr without node_id"},
		{&PublishWidth{TenantID: "a", Namespace: "b", Stream: "c"}, "width must be at least 1"},
		{&PublishWidth{TenantID: "a", Namespace: "b", Width: 2}, "missing field stream"},
		{&Publish{TenantID: "a", Namespace: "b", Stream: "c", Payload: []byte{}, Key: []byte("k"), Shard: u32p(1)}, "shard and key are exclusive"},
		{&PublishBatch{TenantID: "a", Namespace: "b", Stream: "c", Payloads: [][]byte{}, Key: []byte("k"), Shard: u32p(0)}, "shard and key are exclusive"},
		{&Publish{TenantID: "a", Namespace: "b", Stream: "c", Payload: []byte{}, Shard: u32p(1)}, ""},
	} {
		err := c.m.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%#v: %v", c.m, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%#v: error %v, want one containing %q", c.m, err, c.want)
			continue
		}
		wantInvalid(t, err)
	}
}

// TestNotLeaderAsError checks the ordinary error a client without
// FEATURE_REDIRECT gets, and that the redirect survives a trip through an
// error frame.
func TestNotLeaderAsError(t *testing.T) {
	nl := &NotLeader{NodeID: "broker-2", Addr: "10.0.0.6:5000", Generation: 7}
	e := nl.Err()
	if e.Code != CodeNotLeader || e.Retry != RetryRedirect || !e.Retry.Retryable() {
		t.Fatalf("err = %+v", e)
	}
	if !errors.Is(e, &Error{Code: CodeNotLeader}) {
		t.Error("not matched by code")
	}
	if got, ok := NotLeaderFromError(e); !ok || !reflect.DeepEqual(got, nl) {
		t.Errorf("local: %#v, %v", got, ok)
	}
	b, err := MarshalMessage(e.ErrorMessage(true))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	decoded := m.(*ErrorMsg).Err()
	if got, ok := NotLeaderFromError(decoded); !ok || !reflect.DeepEqual(got, nl) {
		t.Errorf("decoded from %s: %#v, %v", b, got, ok)
	}
	plain := e.ErrorMessage(false)
	if plain.Code != "" || plain.Detail != nil || plain.Message == "" {
		t.Errorf("without error codes: %+v", plain)
	}
	for _, other := range []*Error{nil, NewError(CodeNotLeader, "no detail"), NewError(CodeShardUnavailable, "x").WithDetail(DetailNodeID, "b")} {
		if _, ok := NotLeaderFromError(other); ok {
			t.Errorf("NotLeaderFromError(%v) found a redirect", other)
		}
	}
}

func TestDetailUint(t *testing.T) {
	for _, c := range []struct {
		v    any
		want uint64
		ok   bool
	}{
		{uint64(7), 7, true}, {uint32(7), 7, true}, {7, 7, true}, {int64(7), 7, true},
		{float64(7), 7, true}, {json.Number("7"), 7, true},
		{-1, 0, false}, {int64(-1), 0, false}, {float64(-1), 0, false}, {1.5, 0, false},
		{json.Number("1e3"), 0, false}, {"7", 0, false}, {nil, 0, false},
	} {
		got, ok := detailUint(c.v)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("detailUint(%#v) = %d, %v", c.v, got, ok)
		}
	}
}

func TestStaleWidthAndShardOutOfRange(t *testing.T) {
	e := NewStaleWidth("orders", 4, 6)
	if e.Code != CodeStaleWidth || e.Retry != RetryRetry {
		t.Errorf("stale width: %+v", e)
	}
	if w, _ := detailUint(e.Detail[DetailWidth]); w != 4 {
		t.Errorf("width detail %v", e.Detail)
	}
	if s, _ := detailUint(e.Detail[DetailShards]); s != 6 {
		t.Errorf("shards detail %v", e.Detail)
	}
	if err := CheckShard("stream", "ticks", 3, 4); err != nil {
		t.Errorf("shard 3 of 4: %v", err)
	}
	for _, c := range []struct{ shard, shards uint32 }{{4, 4}, {0, 0}, {1<<32 - 1, 4}} {
		err := CheckShard("stream", "ticks", c.shard, c.shards)
		if err == nil {
			t.Fatalf("shard %d of %d accepted", c.shard, c.shards)
		}
		wantInvalid(t, err)
		var we *Error
		errors.As(err, &we)
		if we.Reason() != ReasonShardOutOfRange {
			t.Errorf("reason %q", we.Reason())
		}
		if s, _ := detailUint(we.Detail[DetailShards]); s != uint64(c.shards) {
			t.Errorf("shards detail %v", we.Detail)
		}
	}
}

func FuzzParseClusterMessage(f *testing.F) {
	for _, m := range clusterSamples() {
		b, err := MarshalMessage(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, g := range specGolden {
		f.Add([]byte(g.json))
	}
	for _, s := range []string{
		`{"type":"topology_view","brokers":null}`,
		`{"type":"topology_view"}`,
		`{"type":"shard_owners_view","owners":[{"shard":0,"node_id":"b","unavailable":"not_assigned"}]}`,
		`{"type":"not_leader","node_id":"b","addr":"a","generation":18446744073709551615,"request_id":1}`,
		`{"type":"shard_moved","subscription_id":1,"shard":4294967295,"generation":1,"resume_from":0}`,
		`{"type":"publish","tenant_id":"a","namespace":"b","stream":"c","payload":"","shard":3,"key":"aw=="}`,
		`{"type":"publish_batch","tenant_id":"a","namespace":"b","stream":"c","payloads":[],"shard":0}`,
		`{"type":"stream_shards_view","shards":4,"routing":"modulo"}`,
		`{"type":"publish_width","width":0}`,
		`{"type":"topology_view","brokers":[null,{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkParseMessage)
}

package wire

import (
	"strings"
	"testing"
)

// The shapes of the specification's examples parse to what they say, and
// encode back to the same fields.
func TestCacheCondSpecShapes(t *testing.T) {
	put := `{"type":"cache_put_if","request_id":7,"tenant_id":"acme","namespace":"prod","cache":"leases",` +
		`"key":"endpoint-7","value":"bWU=","ttl_ms":30000,"condition":"absent"}`
	m, err := ParseMessage([]byte(put))
	if err != nil {
		t.Fatal(err)
	}
	p := m.(*CachePutIf)
	if p.Condition == nil || !p.Condition.Absent || string(p.Value) != "me" || *p.TTLMs != 30000 || p.RequestID != 7 {
		t.Fatalf("cache_put_if parsed as %+v", p)
	}
	m, err = ParseMessage([]byte(strings.Replace(put, `"absent"`, `{"version": 41}`, 1)))
	if err != nil || *m.(*CachePutIf).Condition != (CacheCondition{Version: 41}) {
		t.Fatalf("version condition: %+v %v", m, err)
	}
	res := `{ "type": "cache_condition_result", "applied": false, "version": 41, "request_id": 7 }`
	m, err = ParseMessage([]byte(res))
	if err != nil {
		t.Fatal(err)
	}
	if r := m.(*CacheConditionResult); r.Applied || r.Version == nil || *r.Version != 41 || r.RequestID != 7 {
		t.Fatalf("cache_condition_result parsed as %+v", r)
	}
	for _, c := range []struct {
		m    Message
		want string
	}{
		{&CacheConditionResult{Version: u64p(41), RequestID: 7}, `{"type":"cache_condition_result","applied":false,"version":41,"request_id":7}`},
		{&CacheConditionResult{Applied: true, RequestID: 8}, `{"type":"cache_condition_result","applied":true,"request_id":8}`},
		{&CachePutIf{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", Value: []byte{}, Condition: &CacheCondition{Version: 3}, RequestID: 1},
			`{"type":"cache_put_if","tenant_id":"a","namespace":"b","cache":"c","key":"k","value":"","condition":{"version":3},"request_id":1}`},
		{&CacheDeleteIf{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", Version: u64p(0), RequestID: 2},
			`{"type":"cache_delete_if","tenant_id":"a","namespace":"b","cache":"c","key":"k","version":0,"request_id":2}`},
		{&CacheValue{RequestID: 3, Key: "k", Value: []byte("v"), Version: u64p(5)}, `{"type":"cache_value","request_id":3,"key":"k","value":"dg==","version":5}`},
		{&CacheValue{RequestID: 3, Key: "k"}, `{"type":"cache_value","request_id":3,"key":"k","value":null}`},
	} {
		b, err := MarshalMessage(c.m)
		if err != nil || string(b) != c.want {
			t.Errorf("%T encoded as %s (%v), want %s", c.m, b, err, c.want)
		}
	}
}

func TestCacheConditionRefusesOtherShapes(t *testing.T) {
	for _, cond := range []string{`"present"`, `"ABSENT"`, `{}`, `{"v":1}`, `{"version":-1}`, `{"version":"1"}`, `41`, `[]`, `true`} {
		b := `{"type":"cache_put_if","condition":` + cond + `}`
		if _, err := ParseMessage([]byte(b)); err == nil {
			t.Errorf("condition %s accepted", cond)
		} else {
			wantInvalid(t, err)
		}
	}
}

func TestCacheCondValidate(t *testing.T) {
	for _, c := range []struct {
		m     Validator
		field string // "" when valid
	}{
		{&CachePutIf{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", Value: []byte{}, Condition: &CacheCondition{Absent: true}}, ""},
		{&CachePutIf{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", Condition: &CacheCondition{Absent: true}}, "value"},
		{&CachePutIf{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", Value: []byte{}}, "condition"},
		{&CachePutIf{TenantID: "a", Namespace: "b", Key: "k", Value: []byte{}, Condition: &CacheCondition{}}, "cache"},
		{&CachePutIf{TenantID: "a", Namespace: "b", Cache: "c", Value: []byte{}, Condition: &CacheCondition{}}, "key"},
		{&CacheDeleteIf{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", Version: u64p(1)}, ""},
		{&CacheDeleteIf{TenantID: "a", Namespace: "b", Cache: "c", Key: "k"}, "version"},
		{&CacheDeleteIf{Namespace: "b", Cache: "c", Key: "k", Version: u64p(1)}, "tenant_id"},
		{&CacheGetVersioned{TenantID: "a", Namespace: "b", Cache: "c", Key: "k"}, ""},
		{&CacheGetVersioned{TenantID: "a", Cache: "c", Key: "k"}, "namespace"},
	} {
		err := c.m.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%#v refused: %v", c.m, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%#v without %s accepted", c.m, c.field)
			continue
		}
		wantInvalid(t, err)
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("error %q does not name %s", err, c.field)
		}
	}
}

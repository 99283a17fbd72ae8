package wire

import (
	"math"
	"testing"
)

func i64p(v int64) *int64 { return &v }

// counter_add, counter_get and counter_value parse to their fields and
// encode back to the same shapes; never written is "value": null.
func TestCounterShapes(t *testing.T) {
	add := `{"type":"counter_add","tenant_id":"acme","namespace":"prod","cache":"limits","key":"user:42:reqs","delta":-9223372036854775808,"request_id":7}`
	m, err := ParseMessage([]byte(add))
	if err != nil {
		t.Fatal(err)
	}
	a := m.(*CounterAdd)
	if a.Delta == nil || *a.Delta != math.MinInt64 || a.Key != "user:42:reqs" || a.RequestID != 7 || a.Validate() != nil {
		t.Fatalf("counter_add parsed as %+v", a)
	}
	for _, c := range []struct {
		m    Message
		want string
	}{
		{a, add},
		{&CounterGet{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", RequestID: 2},
			`{"type":"counter_get","tenant_id":"a","namespace":"b","cache":"c","key":"k","request_id":2}`},
		{&CounterValue{Key: "k", Value: i64p(0), RequestID: 3}, `{"type":"counter_value","key":"k","value":0,"request_id":3}`},
		{&CounterValue{Key: "k", RequestID: 4}, `{"type":"counter_value","key":"k","value":null,"request_id":4}`},
	} {
		b, err := MarshalMessage(c.m)
		if err != nil || string(b) != c.want {
			t.Errorf("%T encoded as %s (%v), want %s", c.m, b, err, c.want)
		}
	}
	m, err = ParseMessage([]byte(`{"type":"counter_value","key":"k","value":null,"request_id":4}`))
	if err != nil || m.(*CounterValue).Value != nil {
		t.Fatalf("never-written counter_value parsed as %+v, %v", m, err)
	}
}

// A counter_add without a delta, or with one that is not a signed 64-bit
// integer, and a counter op without its names, are invalid_request.
func TestCounterValidation(t *testing.T) {
	for _, b := range []string{
		`{"type":"counter_add","tenant_id":"a","namespace":"b","cache":"c","key":"k","request_id":1}`,
		`{"type":"counter_add","tenant_id":"a","namespace":"b","cache":"c","key":"k","delta":null,"request_id":1}`,
		`{"type":"counter_add","tenant_id":"a","namespace":"b","cache":"","key":"k","delta":1,"request_id":1}`,
		`{"type":"counter_get","tenant_id":"a","namespace":"b","cache":"c","key":"","request_id":1}`,
	} {
		m, err := ParseMessage([]byte(b))
		if err == nil {
			err = m.(Validator).Validate()
		}
		if err == nil {
			t.Errorf("%s accepted", b)
			continue
		}
		wantInvalid(t, err)
	}
	for _, b := range []string{
		`{"type":"counter_add","delta":9223372036854775808}`,
		`{"type":"counter_add","delta":1.5}`,
		`{"type":"counter_add","delta":"1"}`,
	} {
		if _, err := ParseMessage([]byte(b)); err == nil {
			t.Errorf("%s parsed", b)
		} else {
			wantInvalid(t, err)
		}
	}
}

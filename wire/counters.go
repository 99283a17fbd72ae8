package wire

// Messages of counters (FEATURE_COUNTERS).
//
// A counter is a signed 64-bit sum named by a key of a cache, scoped,
// authorized and routed as that cache key is, but held apart from the
// cache's values (a counter and a value may share a key). counter_add
// applies a signed delta and is answered with counter_value carrying the
// sum including it; counter_get is answered with counter_value carrying
// the sum, or "value": null when the counter was never written (which is
// not a sum of 0). A sum that would overflow is refused (invalid_request,
// reason counter_overflow) and adds nothing. A broker without durable
// storage does not advertise the bit and refuses both (unsupported).

// CounterAdd adds Delta to a counter.
type CounterAdd struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Key       string `json:"key"`
	Delta     *int64 `json:"delta"`
	RequestID uint64 `json:"request_id"`
}

// CounterGet reads a counter's sum.
type CounterGet struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Key       string `json:"key"`
	RequestID uint64 `json:"request_id"`
}

// CounterValue answers counter_add (the sum including the delta) and
// counter_get (the sum; nil when the counter was never written). It is
// sent with "value": null, never without the field.
type CounterValue struct {
	Key       string `json:"key"`
	Value     *int64 `json:"value"`
	RequestID uint64 `json:"request_id"`
}

func (*CounterAdd) MessageType() string   { return "counter_add" }
func (*CounterGet) MessageType() string   { return "counter_get" }
func (*CounterValue) MessageType() string { return "counter_value" }

// newCounterMessage returns an empty counter message of type t, or nil.
func newCounterMessage(t string) Message {
	switch t {
	case "counter_add":
		return &CounterAdd{}
	case "counter_get":
		return &CounterGet{}
	case "counter_value":
		return &CounterValue{}
	}
	return nil
}

// Validate checks the required fields of a counter_add.
func (m *CounterAdd) Validate() error {
	if err := validateCache("counter_add", m.TenantID, m.Namespace, m.Cache, m.Key); err != nil {
		return err
	}
	if m.Delta == nil {
		return NewError(CodeInvalidRequest, "counter_add: missing field delta (a signed 64-bit integer)")
	}
	return nil
}

// Validate checks the required fields of a counter_get.
func (m *CounterGet) Validate() error {
	return validateCache("counter_get", m.TenantID, m.Namespace, m.Cache, m.Key)
}

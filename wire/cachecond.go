package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Messages of conditional cache writes (FEATURE_CACHE_CONDITIONAL).
//
// A value's version is the offset of the put that wrote it. cache_put_if
// writes only if its condition holds for the key ("absent": no live
// entry; {"version": N}: the live entry is at version N); cache_delete_if
// removes the key only at a version. Both are answered with
// cache_condition_result: applied, with the version the put wrote (none
// after an applied delete), or refused, with the key's current version
// (left out when the key has none). A refusal is an answer, not an error.
// A cache_value answering a get carries "version" too, to a client that
// offered the bit; cache_get_versioned (a Felix pin) is a cache_get whose
// cache_value carries it whatever the client offered.

// CacheCondition is what a cache_put_if requires of its key: on the wire
// "absent", or {"version": N}.
type CacheCondition struct {
	Absent  bool
	Version uint64 // without Absent
}

// MarshalJSON implements json.Marshaler.
func (c CacheCondition) MarshalJSON() ([]byte, error) {
	if c.Absent {
		return []byte(`"absent"`), nil
	}
	b := strconv.AppendUint([]byte(`{"version":`), c.Version, 10)
	return append(b, '}'), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *CacheCondition) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s != "absent" {
			return fmt.Errorf("unknown condition %q", s)
		}
		*c = CacheCondition{Absent: true}
		return nil
	}
	var o struct {
		Version *uint64 `json:"version"`
	}
	if err := json.Unmarshal(b, &o); err != nil || o.Version == nil {
		return fmt.Errorf(`condition must be "absent" or {"version": n}`)
	}
	*c = CacheCondition{Version: *o.Version}
	return nil
}

// CachePutIf stores a value only if Condition holds. TTLMs nil means no
// expiry.
type CachePutIf struct {
	TenantID  string          `json:"tenant_id"`
	Namespace string          `json:"namespace"`
	Cache     string          `json:"cache"`
	Key       string          `json:"key"`
	Value     []byte          `json:"value"`
	TTLMs     *uint64         `json:"ttl_ms,omitempty"`
	Condition *CacheCondition `json:"condition"`
	RequestID uint64          `json:"request_id"`
}

// CacheDeleteIf removes a key only if its live entry is at Version.
type CacheDeleteIf struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Version   *uint64 `json:"version"`
	RequestID uint64  `json:"request_id"`
}

// CacheConditionResult answers cache_put_if and cache_delete_if. Applied,
// Version is the version the put wrote (nil after an applied delete);
// refused, it is the key's current version, nil when the key has none.
type CacheConditionResult struct {
	Applied   bool    `json:"applied"`
	Version   *uint64 `json:"version,omitempty"`
	RequestID uint64  `json:"request_id"`
}

// CacheGetVersioned reads a value with its version: answered like
// cache_get, with a cache_value that carries the version of a value it
// found.
type CacheGetVersioned struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Key       string `json:"key"`
	RequestID uint64 `json:"request_id"`
}

func (*CachePutIf) MessageType() string           { return "cache_put_if" }
func (*CacheDeleteIf) MessageType() string        { return "cache_delete_if" }
func (*CacheConditionResult) MessageType() string { return "cache_condition_result" }
func (*CacheGetVersioned) MessageType() string    { return "cache_get_versioned" }

// newCacheCondMessage returns an empty conditional-write message of type
// t, or nil.
func newCacheCondMessage(t string) Message {
	switch t {
	case "cache_put_if":
		return &CachePutIf{}
	case "cache_delete_if":
		return &CacheDeleteIf{}
	case "cache_condition_result":
		return &CacheConditionResult{}
	case "cache_get_versioned":
		return &CacheGetVersioned{}
	}
	return nil
}

// Validate checks the required fields of a cache_put_if.
func (m *CachePutIf) Validate() error {
	if err := validateCache("cache_put_if", m.TenantID, m.Namespace, m.Cache, m.Key); err != nil {
		return err
	}
	if m.Value == nil {
		return NewError(CodeInvalidRequest, "cache_put_if: missing field value")
	}
	if m.Condition == nil {
		return NewError(CodeInvalidRequest, `cache_put_if: missing field condition ("absent" or {"version": n})`)
	}
	return nil
}

// Validate checks the required fields of a cache_delete_if.
func (m *CacheDeleteIf) Validate() error {
	if err := validateCache("cache_delete_if", m.TenantID, m.Namespace, m.Cache, m.Key); err != nil {
		return err
	}
	if m.Version == nil {
		return NewError(CodeInvalidRequest, "cache_delete_if: missing field version")
	}
	return nil
}

// Validate checks the required fields of a cache_get_versioned.
func (m *CacheGetVersioned) Validate() error {
	return validateCache("cache_get_versioned", m.TenantID, m.Namespace, m.Cache, m.Key)
}

package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Message is one JSON control message. MessageType returns the value of its
// "type" field.
type Message interface {
	MessageType() string
}

// AckMode is the acknowledgement a publish asks for.
type AckMode string

// Acknowledgement modes.
const (
	AckNone       AckMode = "none"
	AckPerMessage AckMode = "per_message"
	AckPerBatch   AckMode = "per_batch"
)

// Auth opens every client-opened stream.
type Auth struct {
	TenantID    string `json:"tenant_id"`
	Token       string `json:"token"`
	ClientFlags uint16 `json:"client_flags"`
	Features    uint64 `json:"features"`
}

// AuthOK accepts an auth. ServerFlags and ServerFeatures list everything
// the broker supports; PublishWindow is set only when the client offered
// FEATURE_PUBLISH_PIPELINE.
type AuthOK struct {
	ServerFlags    uint16  `json:"server_flags"`
	ServerFeatures uint64  `json:"server_features"`
	PublishWindow  *uint32 `json:"publish_window,omitempty"`
}

// Publish is the JSON single-message publish.
type Publish struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Stream    string  `json:"stream"`
	Payload   []byte  `json:"payload"`
	Key       []byte  `json:"key,omitempty"`
	RequestID uint64  `json:"request_id,omitempty"`
	Ack       AckMode `json:"ack,omitempty"`
	// Shard names the shard outright instead of a key picking it
	// (FEATURE_EXPLICIT_SHARD); never sent with Key. A shard the stream
	// does not have is refused (CheckShard), never wrapped.
	Shard *uint32 `json:"shard,omitempty"`
}

// PublishBatch is the JSON batch publish.
type PublishBatch struct {
	TenantID  string   `json:"tenant_id"`
	Namespace string   `json:"namespace"`
	Stream    string   `json:"stream"`
	Payloads  [][]byte `json:"payloads"`
	Key       []byte   `json:"key,omitempty"`
	RequestID uint64   `json:"request_id,omitempty"`
	Ack       AckMode  `json:"ack,omitempty"`
	// Shard is as in Publish.
	Shard *uint32 `json:"shard,omitempty"`
}

// PublishOK acknowledges a publish. Offset is the first offset of the batch
// on a durable stream, sent only with FLAG_BINARY_PUBLISH_ACK_OFFSET.
type PublishOK struct {
	RequestID uint64  `json:"request_id"`
	Offset    *uint64 `json:"offset,omitempty"`
}

// PublishError refuses a publish. Code, Retry and Detail are sent only to
// clients that offered FEATURE_ERROR_CODES.
type PublishError struct {
	RequestID uint64          `json:"request_id"`
	Message   string          `json:"message"`
	Code      Code            `json:"code,omitempty"`
	Retry     RetryClass      `json:"retry,omitempty"`
	Detail    json.RawMessage `json:"detail,omitempty"`
}

// Err returns the refusal as an *Error.
func (m *PublishError) Err() *Error { return ErrorFromFields(m.Code, m.Retry, m.Message, m.Detail) }

// Subscribe asks for a subscription on one shard of a stream.
type Subscribe struct {
	TenantID       string         `json:"tenant_id"`
	Namespace      string         `json:"namespace"`
	Stream         string         `json:"stream"`
	SubscriptionID *uint64        `json:"subscription_id,omitempty"`
	Start          *StartPosition `json:"start,omitempty"`
	Shard          *uint32        `json:"shard,omitempty"`
}

// Subscribed confirms a subscription. StartOffset and LiveOffset are sent
// only for a subscribe with a start on a durable stream to a client that
// negotiated FLAG_EVENT_BATCH_OFFSETS.
type Subscribed struct {
	SubscriptionID uint64  `json:"subscription_id"`
	StartOffset    *uint64 `json:"start_offset,omitempty"`
	LiveOffset     *uint64 `json:"live_offset,omitempty"`
}

// EventStreamHello is the first frame on a broker-opened event stream.
type EventStreamHello struct {
	SubscriptionID uint64 `json:"subscription_id"`
}

// Event is a single JSON event (accepted for compatibility; the broker
// sends batches).
type Event struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Stream    string  `json:"stream"`
	Payload   []byte  `json:"payload"`
	Offset    *uint64 `json:"offset,omitempty"`
}

// EventBatch is the JSON event batch, for subscribers that did not offer
// FLAG_BINARY_EVENT_BATCH_SHARED. On a durable stream event i is at
// BaseOffset+i.
type EventBatch struct {
	TenantID      string   `json:"tenant_id"`
	Namespace     string   `json:"namespace"`
	Stream        string   `json:"stream"`
	Payloads      [][]byte `json:"payloads"`
	BaseOffset    *uint64  `json:"base_offset,omitempty"`
	SkippedBefore *uint64  `json:"skipped_before,omitempty"`
}

// CachePut stores a value. TTLMs nil means no expiry.
type CachePut struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Value     []byte  `json:"value"`
	TTLMs     *uint64 `json:"ttl_ms,omitempty"`
	RequestID uint64  `json:"request_id"`
}

// CacheGet reads a value.
type CacheGet struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Key       string `json:"key"`
	RequestID uint64 `json:"request_id"`
}

// CacheDelete removes a key; answered with the removed value.
type CacheDelete struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Key       string `json:"key"`
	RequestID uint64 `json:"request_id"`
}

// CacheOK acknowledges a cache_put.
type CacheOK struct {
	RequestID uint64 `json:"request_id"`
}

// CacheValue answers cache_get and cache_delete. Value is nil (JSON null)
// when the key was absent or expired; an empty non-nil value is "".
// Version is the found value's version (the offset of the put that wrote
// it), sent on a get's answer only to a client that offered
// FEATURE_CACHE_CONDITIONAL (cachecond.go).
type CacheValue struct {
	RequestID uint64  `json:"request_id"`
	Key       string  `json:"key"`
	Value     []byte  `json:"value"`
	Version   *uint64 `json:"version,omitempty"`
}

// ErrorMsg is the JSON "error" message. Code, Retry and Detail are sent
// only to clients that offered FEATURE_ERROR_CODES. RequestID names the
// request it answers, when it answers one.
type ErrorMsg struct {
	Message   string          `json:"message"`
	Code      Code            `json:"code,omitempty"`
	Retry     RetryClass      `json:"retry,omitempty"`
	Detail    json.RawMessage `json:"detail,omitempty"`
	RequestID *uint64         `json:"request_id,omitempty"`
}

// Err returns the message as an *Error.
func (m *ErrorMsg) Err() *Error { return ErrorFromFields(m.Code, m.Retry, m.Message, m.Detail) }

// Unsupported answers a request type the broker does not know, when both
// sides negotiated FEATURE_UNSUPPORTED.
type Unsupported struct {
	RequestType string  `json:"request_type"`
	RequestID   *uint64 `json:"request_id,omitempty"`
}

// Unknown is what ParseMessage returns for a well-formed JSON object whose
// type it does not know. Raw is the whole object.
type Unknown struct {
	Type string
	Raw  json.RawMessage
}

func (*Auth) MessageType() string             { return "auth" }
func (*AuthOK) MessageType() string           { return "auth_ok" }
func (*Publish) MessageType() string          { return "publish" }
func (*PublishBatch) MessageType() string     { return "publish_batch" }
func (*PublishOK) MessageType() string        { return "publish_ok" }
func (*PublishError) MessageType() string     { return "publish_error" }
func (*Subscribe) MessageType() string        { return "subscribe" }
func (*Subscribed) MessageType() string       { return "subscribed" }
func (*EventStreamHello) MessageType() string { return "event_stream_hello" }
func (*Event) MessageType() string            { return "event" }
func (*EventBatch) MessageType() string       { return "event_batch" }
func (*CachePut) MessageType() string         { return "cache_put" }
func (*CacheGet) MessageType() string         { return "cache_get" }
func (*CacheDelete) MessageType() string      { return "cache_delete" }
func (*CacheOK) MessageType() string          { return "cache_ok" }
func (*CacheValue) MessageType() string       { return "cache_value" }
func (*ErrorMsg) MessageType() string         { return "error" }
func (*Unsupported) MessageType() string      { return "unsupported" }
func (m *Unknown) MessageType() string        { return m.Type }

// newMessage returns an empty message of the given type, or nil.
func newMessage(t string) Message {
	switch t {
	case "auth":
		return &Auth{}
	case "auth_ok":
		return &AuthOK{}
	case "publish":
		return &Publish{}
	case "publish_batch":
		return &PublishBatch{}
	case "publish_ok":
		return &PublishOK{}
	case "publish_error":
		return &PublishError{}
	case "subscribe":
		return &Subscribe{}
	case "subscribed":
		return &Subscribed{}
	case "event_stream_hello":
		return &EventStreamHello{}
	case "event":
		return &Event{}
	case "event_batch":
		return &EventBatch{}
	case "cache_put":
		return &CachePut{}
	case "cache_get":
		return &CacheGet{}
	case "cache_delete":
		return &CacheDelete{}
	case "cache_ok":
		return &CacheOK{}
	case "cache_value":
		return &CacheValue{}
	case "error":
		return &ErrorMsg{}
	case "unsupported":
		return &Unsupported{}
	}
	if m := newPublishIfMessage(t); m != nil {
		return m
	}
	if m := newCommitMessage(t); m != nil {
		return m
	}
	if m := newIdempotentMessage(t); m != nil {
		return m
	}
	if m := newCacheCondMessage(t); m != nil {
		return m
	}
	if m := newCounterMessage(t); m != nil {
		return m
	}
	if m := newGroupMessage(t); m != nil {
		return m
	}
	return newDurableMessage(t)
}

// ParseMessage decodes one JSON control message. A JSON object with an
// unknown type yields *Unknown and no error; anything that is not a JSON
// object with a string "type", or whose fields do not decode (bad base64,
// wrong types), is an *Error with code invalid_request. Required fields are
// checked by Validate, not here.
func ParseMessage(b []byte) (Message, error) {
	if m, ok := parsePublishOK(b); ok {
		return m, nil
	}
	if m, ok := parseCacheChange(b); ok {
		return m, nil
	}
	if m, ok := parseCachePut(b); ok {
		return m, nil
	}
	if m, ok := parseCacheOK(b); ok {
		return m, nil
	}
	if m, ok := parseGroupRecords(b); ok {
		return m, nil
	}
	typ, ok := leadingType(b)
	if !ok {
		var head struct {
			Type *string `json:"type"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return nil, NewError(CodeInvalidRequest, "invalid JSON message: %v", err)
		}
		if head.Type == nil || *head.Type == "" {
			return nil, NewError(CodeInvalidRequest, "message has no type")
		}
		typ = *head.Type
	}
	m := newMessage(typ)
	if m == nil {
		if ok && !json.Valid(b) {
			return nil, NewError(CodeInvalidRequest, "invalid JSON message")
		}
		return &Unknown{Type: typ, Raw: append(json.RawMessage(nil), b...)}, nil
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, NewError(CodeInvalidRequest, "invalid %s message: %v", typ, err)
	}
	normalizeKey(m)
	return m, nil
}

// leadingType reads the type of a message that starts {"type":"T", as
// every encoder of this protocol writes it, with T printable ASCII free of
// escapes and the object's only "type" member: then the message is
// decoded once rather than twice. Anything else reports false and is decoded in full
// to find its type.
func leadingType(b []byte) (string, bool) {
	const prefix = `{"type":"`
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return "", false
	}
	rest := b[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return "", false
	}
	for _, c := range rest[:end] {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return "", false
		}
	}
	// encoding/json matches member names without regard to case, and the
	// last of several wins: any other "type" member takes the long way.
	for i := end + 1; ; i++ {
		j := bytes.IndexByte(rest[i:], '"') // jump quote to quote: values can be long
		if j < 0 || i+j+6 > len(rest) {
			break
		}
		i += j
		if rest[i+5] == '"' && bytes.EqualFold(rest[i+1:i+5], []byte("type")) {
			return "", false
		}
	}
	return string(rest[:end]), true
}

// normalizeKey makes an empty routing key ("key":"") the same as no key,
// which is also what the encoder sends for an empty key (it leaves it out)
// and what the binary decoder returns for key_len 0.
func normalizeKey(m Message) {
	switch v := m.(type) {
	case *Publish:
		if len(v.Key) == 0 {
			v.Key = nil
		}
	case *PublishBatch:
		if len(v.Key) == 0 {
			v.Key = nil
		}
	case *PublishIf:
		if len(v.Key) == 0 {
			v.Key = nil
		}
	case *PublishIdempotent:
		if len(v.Key) == 0 {
			v.Key = nil
		}
	}
}

// MarshalMessage returns the JSON object for m, with "type" as its first
// field.
func MarshalMessage(m Message) ([]byte, error) {
	if u, ok := m.(*Unknown); ok {
		return u.Raw, nil
	}
	if b, ok := appendFastMessage(nil, m); ok {
		return b, nil
	}
	return marshalMessageGeneral(m)
}

// marshalMessageGeneral is MarshalMessage through encoding/json.
func marshalMessageGeneral(m Message) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("wire: marshal %s: %w", m.MessageType(), err)
	}
	if len(body) < 2 || body[0] != '{' {
		// A nil *T marshals as null; there is no object to add a type to.
		return nil, fmt.Errorf("wire: marshal %s: not a JSON object", m.MessageType())
	}
	out := make([]byte, 0, len(body)+len(m.MessageType())+10)
	out = append(out, `{"type":"`...)
	out = append(out, m.MessageType()...)
	out = append(out, '"')
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}

// AppendMessageFrame appends a whole JSON frame (header with flags 0, then
// the JSON object) for m to dst.
func AppendMessageFrame(dst []byte, m Message) ([]byte, error) {
	body, err := MarshalMessage(m)
	if err != nil {
		return dst, err
	}
	return AppendFrame(dst, 0, body), nil
}

// StartPosition is where a subscription starts: "latest", "earliest" or
// {"offset": n}.
type StartPosition struct {
	Kind   StartKind
	Offset uint64 // with StartOffset
}

// StartKind names the kind of StartPosition.
type StartKind uint8

// Start kinds.
const (
	StartLatest StartKind = iota
	StartEarliest
	StartOffset
)

// MarshalJSON implements json.Marshaler.
func (p StartPosition) MarshalJSON() ([]byte, error) {
	switch p.Kind {
	case StartEarliest:
		return []byte(`"earliest"`), nil
	case StartOffset:
		return []byte(fmt.Sprintf(`{"offset":%d}`, p.Offset)), nil
	default:
		return []byte(`"latest"`), nil
	}
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *StartPosition) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case "latest":
			*p = StartPosition{Kind: StartLatest}
		case "earliest":
			*p = StartPosition{Kind: StartEarliest}
		default:
			return fmt.Errorf("unknown start %q", s)
		}
		return nil
	}
	var o struct {
		Offset *uint64 `json:"offset"`
	}
	if err := json.Unmarshal(b, &o); err != nil || o.Offset == nil {
		return fmt.Errorf("start must be \"latest\", \"earliest\" or {\"offset\": n}")
	}
	*p = StartPosition{Kind: StartOffset, Offset: *o.Offset}
	return nil
}

// AppendPublishOKFrame appends the frame of a publish_ok for requestID
// (with offset when non-nil) to dst. It writes the same bytes as
// AppendMessageFrame of a *PublishOK without going through encoding/json:
// an acknowledgement is sent for every acked publish.
func AppendPublishOKFrame(dst []byte, requestID uint64, offset *uint64) []byte {
	var body [96]byte
	b := append(body[:0], `{"type":"publish_ok","request_id":`...)
	b = strconv.AppendUint(b, requestID, 10)
	if offset != nil {
		b = append(b, `,"offset":`...)
		b = strconv.AppendUint(b, *offset, 10)
	}
	b = append(b, '}')
	return AppendFrame(dst, 0, b)
}

// publishOKPrefix starts the exact form AppendPublishOKFrame writes.
const publishOKPrefix = `{"type":"publish_ok","request_id":`

// parsePublishOK decodes the exact publish_ok form the broker writes,
// {"type":"publish_ok","request_id":N} with an optional ,"offset":M, without
// encoding/json: a client reads one per acked publish. Anything else
// (other spacing, field order, extra fields) reports false and takes the
// general path, which accepts every valid form.
func parsePublishOK(b []byte) (*PublishOK, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(publishOKPrefix))
	if !ok {
		return nil, false
	}
	id, rest, ok := cutUint(rest)
	if !ok {
		return nil, false
	}
	m := &PublishOK{RequestID: id}
	if after, found := bytes.CutPrefix(rest, []byte(`,"offset":`)); found {
		off, tail, ok := cutUint(after)
		if !ok {
			return nil, false
		}
		m.Offset, rest = &off, tail
	}
	if len(rest) != 1 || rest[0] != '}' {
		return nil, false
	}
	return m, true
}

// cutUint parses the decimal digits at the start of b as a uint64 (no
// sign, no leading zero unless the number is 0) and returns the rest.
func cutUint(b []byte) (uint64, []byte, bool) {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && b[0] == '0') {
		return 0, nil, false
	}
	v, err := strconv.ParseUint(string(b[:n]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return v, b[n:], true
}

package wire

import (
	"encoding/json"
	"strings"
)

// Consumer groups (FEATURE_CONSUMER_GROUP, FEATURE_GROUP_CLAIM_CONTROL,
// FEATURE_GROUP_DEAD_LETTERS, FEATURE_GROUP_ADMIN), on the control
// stream. Every request names its scope (GroupScope: tenant, namespace,
// stream, shard, group) and a request_id; each is answered once, by the
// message named beside it or by an error carrying the request_id.
//
//	group_poll          ⇒ group_records
//	group_ack           ⇒ cache_ok
//	group_nack          ⇒ cache_ok
//	group_extend        ⇒ group_extended
//	group_dead_letter   ⇒ cache_ok
//	group_dead_letters  ⇒ group_dead_letter_list
//	group_discard       ⇒ cache_ok
//	group_redrive       ⇒ cache_ok
//	group_seek          ⇒ group_position
//	group_describe      ⇒ group_info
//	group_delete        ⇒ group_deleted

// MaxGroupNameBytes bounds a group's name.
const MaxGroupNameBytes = 256

// GroupScope names one group on one shard of a stream.
type GroupScope struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Shard     uint32 `json:"shard"`
	Group     string `json:"group"`
}

// validate checks the scope's names.
func (s *GroupScope) validate(kind string) error {
	if err := requireNames(kind, [2]string{"tenant_id", s.TenantID}, [2]string{"namespace", s.Namespace},
		[2]string{"stream", s.Stream}, [2]string{"group", s.Group}); err != nil {
		return err
	}
	if len(s.Group) > MaxGroupNameBytes || strings.ContainsAny(s.Group, "\x00\n") {
		return NewError(CodeInvalidRequest, "%s: group name must be at most %d bytes without NUL or newline", kind, MaxGroupNameBytes)
	}
	return nil
}

// GroupPoll claims up to MaxRecords records. WaitMS is how long the
// broker may hold the poll open for work (capped by
// FELIX_GROUP_MAX_WAIT_MS); VisibilityMS how long its claims stand
// (FEATURE_GROUP_CLAIM_CONTROL; absent: FELIX_GROUP_VISIBILITY_TIMEOUT_MS).
type GroupPoll struct {
	GroupScope
	MaxRecords   uint32  `json:"max_records"`
	WaitMS       uint64  `json:"wait_ms,omitempty"`
	VisibilityMS *uint64 `json:"visibility_ms,omitempty"`
	RequestID    uint64  `json:"request_id"`
}

// GroupRecord is one claimed record. Attempts counts deliveries including
// this one (0: not reported).
type GroupRecord struct {
	Offset          uint64 `json:"offset"`
	Payload         []byte `json:"payload"`
	Attempts        uint32 `json:"attempts,omitempty"`
	Publisher       string `json:"publisher,omitempty"`
	TimestampMicros uint64 `json:"timestamp_micros,omitempty"`
}

// GroupRecords answers group_poll; empty records means nothing was
// available.
type GroupRecords struct {
	Records   []GroupRecord `json:"records"`
	RequestID uint64        `json:"request_id"`
}

// GroupAck finishes Offset.
type GroupAck struct {
	GroupScope
	Offset    *uint64 `json:"offset"`
	RequestID uint64  `json:"request_id"`
}

// GroupNack hands Offset back, owed after DelayMS
// (FEATURE_GROUP_CLAIM_CONTROL). Attempts names the delivery handed back;
// absent hands back whatever claim stands.
type GroupNack struct {
	GroupScope
	Offset    *uint64 `json:"offset"`
	Attempts  *uint32 `json:"attempts,omitempty"`
	DelayMS   *uint64 `json:"delay_ms,omitempty"`
	RequestID uint64  `json:"request_id"`
}

// GroupExtend keeps the claim on Offset (delivery Attempts) standing for
// ExtendMS from now.
type GroupExtend struct {
	GroupScope
	Offset    *uint64 `json:"offset"`
	Attempts  *uint32 `json:"attempts,omitempty"`
	ExtendMS  uint64  `json:"extend_ms"`
	RequestID uint64  `json:"request_id"`
}

// GroupExtended answers group_extend with the extension granted.
type GroupExtended struct {
	VisibleMS uint64 `json:"visible_ms"`
	RequestID uint64 `json:"request_id"`
}

// GroupDeadLetter lists Offset as a dead letter and finishes it.
type GroupDeadLetter struct {
	GroupScope
	Offset    *uint64 `json:"offset"`
	RequestID uint64  `json:"request_id"`
}

// GroupDeadLetters asks for the group's dead letters.
type GroupDeadLetters struct {
	GroupScope
	RequestID uint64 `json:"request_id"`
}

// GroupDeadLetterList answers group_dead_letters, offsets ascending.
type GroupDeadLetterList struct {
	Offsets   []uint64 `json:"offsets"`
	RequestID uint64   `json:"request_id"`
}

// GroupDiscard drops Offset from the dead letters.
type GroupDiscard struct {
	GroupScope
	Offset    *uint64 `json:"offset"`
	RequestID uint64  `json:"request_id"`
}

// GroupRedrive puts the dead letter Offset back in play.
type GroupRedrive struct {
	GroupScope
	Offset    *uint64 `json:"offset"`
	RequestID uint64  `json:"request_id"`
}

// GroupSeekStart is where group_seek moves a cursor: "earliest",
// "latest" or {"offset": n}.
type GroupSeekStart struct {
	Earliest, Latest bool
	Offset           uint64
}

// MarshalJSON encodes the start as the spec spells it.
func (s GroupSeekStart) MarshalJSON() ([]byte, error) {
	switch {
	case s.Earliest:
		return []byte(`"earliest"`), nil
	case s.Latest:
		return []byte(`"latest"`), nil
	}
	return json.Marshal(struct {
		Offset uint64 `json:"offset"`
	}{s.Offset})
}

// UnmarshalJSON decodes "earliest", "latest" or {"offset": n}.
func (s *GroupSeekStart) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) == nil {
		switch name {
		case "earliest":
			*s = GroupSeekStart{Earliest: true}
			return nil
		case "latest":
			*s = GroupSeekStart{Latest: true}
			return nil
		}
		return NewError(CodeInvalidRequest, "group_seek: start %q is not earliest, latest or {\"offset\": n}", name)
	}
	var o struct {
		Offset *uint64 `json:"offset"`
	}
	if err := json.Unmarshal(b, &o); err != nil || o.Offset == nil {
		return NewError(CodeInvalidRequest, "group_seek: start is not earliest, latest or {\"offset\": n}")
	}
	*s = GroupSeekStart{Offset: *o.Offset}
	return nil
}

// GroupSeek moves the group's cursor to Start; with IfNew only a group
// that does not exist yet.
type GroupSeek struct {
	GroupScope
	Start     *GroupSeekStart `json:"start"`
	IfNew     bool            `json:"if_new,omitempty"`
	RequestID uint64          `json:"request_id"`
}

// GroupPosition answers group_seek: the group's cursor and whether it
// moved.
type GroupPosition struct {
	Offset    uint64 `json:"offset"`
	Moved     bool   `json:"moved"`
	RequestID uint64 `json:"request_id"`
}

// GroupDescribe asks for the group's cursor and counts.
type GroupDescribe struct {
	GroupScope
	RequestID uint64 `json:"request_id"`
}

// GroupInfo answers group_describe. Committed is absent for a group with
// no cursor; InFlight and Owed are the leader's memory.
type GroupInfo struct {
	Committed   *uint64 `json:"committed,omitempty"`
	Tail        uint64  `json:"tail"`
	InFlight    uint64  `json:"in_flight"`
	Owed        uint64  `json:"owed"`
	DeadLetters uint64  `json:"dead_letters"`
	RequestID   uint64  `json:"request_id"`
}

// GroupDelete removes the group's cursor and dead letters.
type GroupDelete struct {
	GroupScope
	RequestID uint64 `json:"request_id"`
}

// GroupDeleted answers group_delete.
type GroupDeleted struct {
	Existed   bool   `json:"existed"`
	RequestID uint64 `json:"request_id"`
}

func (*GroupPoll) MessageType() string           { return "group_poll" }
func (*GroupRecords) MessageType() string        { return "group_records" }
func (*GroupAck) MessageType() string            { return "group_ack" }
func (*GroupNack) MessageType() string           { return "group_nack" }
func (*GroupExtend) MessageType() string         { return "group_extend" }
func (*GroupExtended) MessageType() string       { return "group_extended" }
func (*GroupDeadLetter) MessageType() string     { return "group_dead_letter" }
func (*GroupDeadLetters) MessageType() string    { return "group_dead_letters" }
func (*GroupDeadLetterList) MessageType() string { return "group_dead_letter_list" }
func (*GroupDiscard) MessageType() string        { return "group_discard" }
func (*GroupRedrive) MessageType() string        { return "group_redrive" }
func (*GroupSeek) MessageType() string           { return "group_seek" }
func (*GroupPosition) MessageType() string       { return "group_position" }
func (*GroupDescribe) MessageType() string       { return "group_describe" }
func (*GroupInfo) MessageType() string           { return "group_info" }
func (*GroupDelete) MessageType() string         { return "group_delete" }
func (*GroupDeleted) MessageType() string        { return "group_deleted" }

// newGroupMessage returns an empty group message of type t, or nil.
func newGroupMessage(t string) Message {
	switch t {
	case "group_poll":
		return &GroupPoll{}
	case "group_records":
		return &GroupRecords{}
	case "group_ack":
		return &GroupAck{}
	case "group_nack":
		return &GroupNack{}
	case "group_extend":
		return &GroupExtend{}
	case "group_extended":
		return &GroupExtended{}
	case "group_dead_letter":
		return &GroupDeadLetter{}
	case "group_dead_letters":
		return &GroupDeadLetters{}
	case "group_dead_letter_list":
		return &GroupDeadLetterList{}
	case "group_discard":
		return &GroupDiscard{}
	case "group_redrive":
		return &GroupRedrive{}
	case "group_seek":
		return &GroupSeek{}
	case "group_position":
		return &GroupPosition{}
	case "group_describe":
		return &GroupDescribe{}
	case "group_info":
		return &GroupInfo{}
	case "group_delete":
		return &GroupDelete{}
	case "group_deleted":
		return &GroupDeleted{}
	}
	return nil
}

func requireOffset(kind string, o *uint64) error {
	if o == nil {
		return NewError(CodeInvalidRequest, "%s: missing field offset", kind)
	}
	return nil
}

// Validate checks a group_poll.
func (m *GroupPoll) Validate() error {
	if err := m.validate("group_poll"); err != nil {
		return err
	}
	if m.MaxRecords == 0 {
		return NewError(CodeInvalidRequest, "group_poll: max_records must be at least 1")
	}
	return nil
}

// Validate checks a group_ack.
func (m *GroupAck) Validate() error {
	if err := m.validate("group_ack"); err != nil {
		return err
	}
	return requireOffset("group_ack", m.Offset)
}

// Validate checks a group_nack.
func (m *GroupNack) Validate() error {
	if err := m.validate("group_nack"); err != nil {
		return err
	}
	return requireOffset("group_nack", m.Offset)
}

// Validate checks a group_extend.
func (m *GroupExtend) Validate() error {
	if err := m.validate("group_extend"); err != nil {
		return err
	}
	return requireOffset("group_extend", m.Offset)
}

// Validate checks a group_dead_letter.
func (m *GroupDeadLetter) Validate() error {
	if err := m.validate("group_dead_letter"); err != nil {
		return err
	}
	return requireOffset("group_dead_letter", m.Offset)
}

// Validate checks a group_dead_letters.
func (m *GroupDeadLetters) Validate() error { return m.validate("group_dead_letters") }

// Validate checks a group_discard.
func (m *GroupDiscard) Validate() error {
	if err := m.validate("group_discard"); err != nil {
		return err
	}
	return requireOffset("group_discard", m.Offset)
}

// Validate checks a group_redrive.
func (m *GroupRedrive) Validate() error {
	if err := m.validate("group_redrive"); err != nil {
		return err
	}
	return requireOffset("group_redrive", m.Offset)
}

// Validate checks a group_seek.
func (m *GroupSeek) Validate() error {
	if err := m.validate("group_seek"); err != nil {
		return err
	}
	if m.Start == nil {
		return NewError(CodeInvalidRequest, "group_seek: missing field start")
	}
	return nil
}

// Validate checks a group_describe.
func (m *GroupDescribe) Validate() error { return m.validate("group_describe") }

// Validate checks a group_delete.
func (m *GroupDelete) Validate() error { return m.validate("group_delete") }

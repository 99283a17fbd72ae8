package wire

import "math"

// Atomic commits (FEATURE_ATOMIC_COMMIT, advertised with durable storage;
// docs/protocol.md "commit", docs/atomic-commit.md).
//
// commit writes exactly one event (a publish or enqueue op) and the state
// changes beside it (put and delete ops) as one record on one shard of a
// durable stream: the shard entity_key routes to, or the one shard names.
// It is answered like publish_if: publish_ok with the record's offset once
// durable, publish_refused with offset_mismatch when expected_offset is set
// and is not the shard's next, publish_error otherwise. state_get reads a
// key of that shard's state, answered with state_value whose version is
// the offset of the commit that wrote the value.

// Commit op kinds.
const (
	CommitOpPublish = "publish"
	CommitOpEnqueue = "enqueue"
	CommitOpPut     = "put"
	CommitOpDelete  = "delete"
)

// CommitOp is one operation of a commit. Stream, when set, must be the
// commit's stream (another stream is another log: refused, reason
// not_on_owning_shard, detail index).
type CommitOp struct {
	Op      string `json:"op"`
	Stream  string `json:"stream,omitempty"`
	Payload []byte `json:"payload,omitempty"` // publish, enqueue
	Key     string `json:"key,omitempty"`     // put, delete
	Value   []byte `json:"value,omitempty"`   // put
}

// IsEvent reports whether the op is the commit's event.
func (o *CommitOp) IsEvent() bool { return o.Op == CommitOpPublish || o.Op == CommitOpEnqueue }

// Commit is an atomic event + state commit on one shard.
type Commit struct {
	TenantID       string     `json:"tenant_id"`
	Namespace      string     `json:"namespace"`
	Stream         string     `json:"stream"`
	EntityKey      []byte     `json:"entity_key,omitempty"`
	Shard          *uint32    `json:"shard,omitempty"`
	Ops            []CommitOp `json:"ops"`
	ExpectedOffset *uint64    `json:"expected_offset,omitempty"`
	RequestID      uint64     `json:"request_id"`
}

// StateGet reads one key of a shard's commit state.
type StateGet struct {
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Stream    string  `json:"stream"`
	EntityKey []byte  `json:"entity_key,omitempty"`
	Shard     *uint32 `json:"shard,omitempty"`
	Key       string  `json:"key"`
	RequestID uint64  `json:"request_id"`
}

// StateValue answers a state_get: Value is null and Version absent for a
// key the shard's state does not hold.
type StateValue struct {
	RequestID uint64  `json:"request_id"`
	Key       string  `json:"key"`
	Value     []byte  `json:"value"`
	Version   *uint64 `json:"version,omitempty"`
}

func (*Commit) MessageType() string     { return "commit" }
func (*StateGet) MessageType() string   { return "state_get" }
func (*StateValue) MessageType() string { return "state_value" }

func newCommitMessage(t string) Message {
	switch t {
	case "commit":
		return &Commit{}
	case "state_get":
		return &StateGet{}
	case "state_value":
		return &StateValue{}
	}
	return nil
}

// ReasonNotOnOwningShard is the invalid_request reason of a commit op
// naming another stream; detail "index" is the op's index.
const ReasonNotOnOwningShard = "not_on_owning_shard"

// ReasonEventCount is the invalid_request reason of a commit without
// exactly one event op.
const ReasonEventCount = "event_count"

// MaxCommitKeyBytes bounds a state key.
const MaxCommitKeyBytes = math.MaxUint16

// Validate checks a commit: the names, exactly one event op, every op
// known and on the commit's stream, keys present and bounded, not both
// shard and entity_key.
func (m *Commit) Validate() error {
	if err := requireNames("commit", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream}); err != nil {
		return err
	}
	events := 0
	for i := range m.Ops {
		op := &m.Ops[i]
		if op.Stream != "" && op.Stream != m.Stream {
			return NewError(CodeInvalidRequest, "commit: op %d is on stream %s, not %s: a commit writes one shard's log", i, op.Stream, m.Stream).
				WithDetail(DetailReason, ReasonNotOnOwningShard).WithDetail("index", i)
		}
		switch op.Op {
		case CommitOpPublish, CommitOpEnqueue:
			events++
		case CommitOpPut, CommitOpDelete:
			if op.Key == "" {
				return NewError(CodeInvalidRequest, "commit: op %d (%s) has no key", i, op.Op)
			}
			if len(op.Key) > MaxCommitKeyBytes {
				return NewError(CodeInvalidRequest, "commit: op %d has a key of %d bytes (at most %d)", i, len(op.Key), MaxCommitKeyBytes)
			}
		default:
			return NewError(CodeInvalidRequest, "commit: op %d: unknown op %q", i, op.Op)
		}
	}
	if events != 1 {
		return NewError(CodeInvalidRequest, "commit: %d event ops (publish or enqueue); a commit writes exactly one", events).
			WithDetail(DetailReason, ReasonEventCount)
	}
	return validShardOrKey("commit", m.Shard, m.EntityKey)
}

// Event returns the commit's event payload (Validate has checked there is
// exactly one).
func (m *Commit) Event() []byte {
	for i := range m.Ops {
		if m.Ops[i].IsEvent() {
			if m.Ops[i].Payload == nil {
				return []byte{}
			}
			return m.Ops[i].Payload
		}
	}
	return nil
}

// Validate checks a state_get.
func (m *StateGet) Validate() error {
	if err := requireNames("state_get", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace},
		[2]string{"stream", m.Stream}, [2]string{"key", m.Key}); err != nil {
		return err
	}
	return validShardOrKey("state_get", m.Shard, m.EntityKey)
}

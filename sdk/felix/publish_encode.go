package felix

import (
	"math"

	"github.com/felixmq/felix/wire"
)

// AckMode is the acknowledgement a publish waits for.
type AckMode int

// Acknowledgement modes.
const (
	// AckNone returns once the frame is handed to the stream's writer;
	// the broker sends nothing back and failures surface only in Finish.
	AckNone AckMode = iota
	// AckPerMessage waits for the broker's publish_ok or publish_error.
	AckPerMessage
	// AckPerBatch waits for one answer covering the whole batch.
	AckPerBatch
)

// String returns the mode's wire name.
func (a AckMode) String() string {
	switch a {
	case AckNone:
		return string(wire.AckNone)
	case AckPerMessage:
		return string(wire.AckPerMessage)
	case AckPerBatch:
		return string(wire.AckPerBatch)
	}
	return "invalid"
}

// publishReq describes one publish call before encoding.
type publishReq struct {
	namespace, stream string
	key               []byte
	payloads          [][]byte
	single            bool // Publish/PublishKeyed: JSON "publish", not "publish_batch"
	ack               AckMode
}

func (r *publishReq) validate(maxFrame uint32) error {
	switch {
	case r.ack < AckNone || r.ack > AckPerBatch:
		return invalidArg("unknown ack mode %d", r.ack)
	case r.namespace == "" || r.stream == "":
		return invalidArg("namespace and stream are required")
	case len(r.namespace) > math.MaxUint16 || len(r.stream) > math.MaxUint16:
		return invalidArg("namespace or stream longer than 65535 bytes")
	case len(r.key) > math.MaxUint16:
		return invalidArg("key longer than 65535 bytes")
	case len(r.payloads) == 0:
		return invalidArg("a batch needs at least one payload")
	}
	var n uint64
	for _, p := range r.payloads {
		n += 4 + uint64(len(p))
	}
	if n > uint64(maxFrame) {
		return invalidArg("publish of %d bytes is larger than MaxFrameBytes %d", n, maxFrame)
	}
	return nil
}

// encode builds the whole frame for r. id is the request id (0 without an
// ack). Binary frames are used when the broker advertised every flag the
// request needs; JSON otherwise.
func (c *Client) encode(r *publishReq, id uint64) ([]byte, error) {
	acked := r.ack != AckNone
	keyed := len(r.key) > 0
	flags := wire.PublishFlags(acked, keyed)
	if c.serverFlags&flags == flags {
		bp := wire.BinaryPublish{RequestID: id, Key: r.key, TenantID: c.cfg.Tenant,
			Namespace: r.namespace, Stream: r.stream, Payloads: r.payloads}
		return bp.AppendFrame(make([]byte, 0, wire.HeaderLen+bp.BodyLen(flags)), flags), nil
	}
	return wire.AppendMessageFrame(nil, c.jsonPublish(r, id))
}

func (c *Client) jsonPublish(r *publishReq, id uint64) wire.Message {
	var key []byte
	if len(r.key) > 0 {
		key = r.key
	}
	if r.single {
		m := &wire.Publish{TenantID: c.cfg.Tenant, Namespace: r.namespace, Stream: r.stream,
			Payload: nonNil(r.payloads[0]), Key: key, Ack: wire.AckNone}
		if r.ack != AckNone {
			m.RequestID, m.Ack = id, wire.AckPerMessage
		}
		return m
	}
	payloads := make([][]byte, len(r.payloads))
	for i, p := range r.payloads {
		payloads[i] = nonNil(p)
	}
	m := &wire.PublishBatch{TenantID: c.cfg.Tenant, Namespace: r.namespace, Stream: r.stream,
		Payloads: payloads, Key: key, Ack: wire.AckNone}
	if r.ack != AckNone {
		m.RequestID, m.Ack = id, wire.AckPerBatch
	}
	return m
}

// nonNil turns a nil payload into an empty one, so JSON carries "" rather
// than null.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

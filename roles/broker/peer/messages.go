package peer

import (
	"encoding/json"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// ProtocolVersion is the version of the peer protocol this release
// speaks. Both ends of a link must speak the same one.
const ProtocolVersion = 2

// Peer message types: internal to brokers, never seen by a client, so
// they live here and not in wire. Each is one JSON object framed by the
// wire frame header (flags 0), with "type" first.
const (
	TypeHello   = "peer_hello"
	TypeWelcome = "peer_welcome"
	TypePing    = "peer_ping"
	TypePong    = "peer_pong"
)

// Hello is the dialer's first frame on a link: who it is and whom it
// meant to reach.
type Hello struct {
	// NodeID is the dialer's node id; it must be the one its certificate
	// names.
	NodeID string `json:"node_id"`
	// StorageID is the dialer's storage identity (new with every new data
	// directory).
	StorageID string `json:"storage_id"`
	// Version is the peer protocol version the dialer speaks.
	Version int `json:"version"`
	// To is the node id the dialer means to reach.
	To string `json:"to"`
}

// Welcome is the listener's answer to an accepted Hello.
type Welcome struct {
	NodeID    string `json:"node_id"`
	StorageID string `json:"storage_id"`
	Version   int    `json:"version"`
}

// Ping asks the other end for a Pong with the same Seq.
type Ping struct {
	Seq uint64 `json:"seq"`
}

// Pong answers the Ping with the same Seq.
type Pong struct {
	Seq uint64 `json:"seq"`
}

// MessageType implements wire.Message.
func (*Hello) MessageType() string   { return TypeHello }
func (*Welcome) MessageType() string { return TypeWelcome }
func (*Ping) MessageType() string    { return TypePing }
func (*Pong) MessageType() string    { return TypePong }

// Unknown is a message of a type this release does not know. A link
// ignores it, so a later release can add messages.
type Unknown struct {
	Type string
}

// MessageType implements wire.Message.
func (u *Unknown) MessageType() string { return u.Type }

// ParseMessage decodes one peer message. A JSON object with an unknown
// type yields *Unknown and no error; anything else that does not decode
// is an error naming the problem.
func ParseMessage(b []byte) (wire.Message, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("peer: invalid JSON message: %w", err)
	}
	var m wire.Message
	switch head.Type {
	case "":
		return nil, fmt.Errorf("peer: message has no type")
	case TypeHello:
		m = &Hello{}
	case TypeWelcome:
		m = &Welcome{}
	case TypePing:
		m = &Ping{}
	case TypePong:
		m = &Pong{}
	default:
		return &Unknown{Type: head.Type}, nil
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("peer: invalid %s message: %w", head.Type, err)
	}
	return m, nil
}

// appendFrame appends m as one frame.
func appendFrame(dst []byte, m wire.Message) ([]byte, error) {
	return wire.AppendMessageFrame(dst, m)
}

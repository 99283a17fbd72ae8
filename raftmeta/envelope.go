package raftmeta

import (
	"encoding/binary"
	"fmt"
	"log/slog"
)

// An entry's data is an envelope: a version byte, the 8-byte big-endian
// proposal id the proposing member chose, then the command. The id lets the
// proposer recognise its own command when it applies it.
const (
	envelopeVersion = 1
	envelopeHeader  = 9
)

func encodeEnvelope(id uint64, cmd []byte) []byte {
	out := make([]byte, envelopeHeader, envelopeHeader+len(cmd))
	out[0] = envelopeVersion
	binary.BigEndian.PutUint64(out[1:], id)
	return append(out, cmd...)
}

func decodeEnvelope(b []byte) (id uint64, cmd []byte, err error) {
	if len(b) < envelopeHeader || b[0] != envelopeVersion {
		return 0, nil, fmt.Errorf("raftmeta: bad entry envelope (%d bytes)", len(b))
	}
	return binary.BigEndian.Uint64(b[1:]), b[envelopeHeader:], nil
}

// raftLogger adapts slog to raft's Logger. Panic and Fatal keep raft's
// contract (they do not return).
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)              { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Info(v ...any)               { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)              { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any)   { r.Panicf(f, v...) }
func (r raftLogger) Panic(v ...any)              { s := fmt.Sprint(v...); r.l.Error(s); panic(s) }
func (r raftLogger) Panicf(f string, v ...any)   { s := fmt.Sprintf(f, v...); r.l.Error(s); panic(s) }

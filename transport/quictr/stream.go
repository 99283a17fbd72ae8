package quictr

import (
	"context"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/transport"
)

// sendStream is a transport.SendStream over a quic-go unidirectional
// send stream.
type sendStream struct {
	s *quic.SendStream
	// ctx is s's context with its cause translated, made by the first
	// call of Context.
	ctxOnce sync.Once
	ctx     context.Context
}

func (w *sendStream) Write(p []byte) (int, error) {
	n, err := w.s.Write(p)
	if err != nil {
		err = translate(err)
	}
	return n, err
}

func (w *sendStream) TryWriteAll(p []byte) error {
	if err := w.s.TryWriteAll(p); err != nil {
		return translate(err)
	}
	return nil
}

func (w *sendStream) Close() error { return translate(w.s.Close()) }

func (w *sendStream) CancelWrite(code transport.StreamErrorCode) {
	w.s.CancelWrite(quic.StreamErrorCode(code))
}

func (w *sendStream) SetWriteDeadline(t time.Time) error { return w.s.SetWriteDeadline(t) }

func (w *sendStream) Context() context.Context {
	w.ctxOnce.Do(func() { w.ctx = translatedContext(w.s.Context()) })
	return w.ctx
}

// receiveStream is a transport.ReceiveStream over a quic-go
// unidirectional receive stream.
type receiveStream struct{ s *quic.ReceiveStream }

func (r *receiveStream) Read(p []byte) (int, error) {
	n, err := r.s.Read(p)
	if err != nil {
		err = translate(err)
	}
	return n, err
}

func (r *receiveStream) CancelRead(code transport.StreamErrorCode) {
	r.s.CancelRead(quic.StreamErrorCode(code))
}

func (r *receiveStream) SetReadDeadline(t time.Time) error { return r.s.SetReadDeadline(t) }

// stream is a transport.Stream over a quic-go bidirectional stream: one
// wrapper for both directions.
type stream struct {
	s *quic.Stream
	// ctx is the send direction's context with its cause translated,
	// made by the first call of Context.
	ctxOnce sync.Once
	ctx     context.Context
}

func (b *stream) Read(p []byte) (int, error) {
	n, err := b.s.Read(p)
	if err != nil {
		err = translate(err)
	}
	return n, err
}

func (b *stream) Write(p []byte) (int, error) {
	n, err := b.s.Write(p)
	if err != nil {
		err = translate(err)
	}
	return n, err
}

func (b *stream) TryWriteAll(p []byte) error {
	if err := b.s.TryWriteAll(p); err != nil {
		return translate(err)
	}
	return nil
}

func (b *stream) Close() error { return translate(b.s.Close()) }

func (b *stream) CancelWrite(code transport.StreamErrorCode) {
	b.s.CancelWrite(quic.StreamErrorCode(code))
}

func (b *stream) CancelRead(code transport.StreamErrorCode) {
	b.s.CancelRead(quic.StreamErrorCode(code))
}

func (b *stream) SetReadDeadline(t time.Time) error  { return b.s.SetReadDeadline(t) }
func (b *stream) SetWriteDeadline(t time.Time) error { return b.s.SetWriteDeadline(t) }
func (b *stream) SetDeadline(t time.Time) error      { return b.s.SetDeadline(t) }

func (b *stream) Context() context.Context {
	b.ctxOnce.Do(func() { b.ctx = translatedContext(b.s.Context()) })
	return b.ctx
}

var (
	_ transport.Stream        = (*stream)(nil)
	_ transport.SendStream    = (*sendStream)(nil)
	_ transport.ReceiveStream = (*receiveStream)(nil)
	_ transport.Conn          = (*conn)(nil)
	_ transport.Listener      = (*listener)(nil)
)

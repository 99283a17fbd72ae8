package mux

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/felixmq/felix/transport"
)

// readLoop reads frames until the session ends. It never writes to the
// connection itself (the writer goroutine does, see kick), so a peer
// that stops reading cannot stop us from reading.
func (s *Session) readLoop() {
	br := bufio.NewReaderSize(s.conn, 64<<10)
	var hb [headerLen]byte
	var scratch [8 + maxCloseMessage]byte // every non-DATA payload fits
	first := true
	for {
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			s.readFailed(err)
			return
		}
		h, err := parseHeader(hb[:])
		if err != nil {
			s.violation(err)
			return
		}
		var payload []byte
		if h.typ == frameData {
			payload = getData(int(h.length))
		} else {
			payload = scratch[:h.length]
		}
		if _, err := io.ReadFull(br, payload); err != nil {
			s.readFailed(err)
			return
		}
		s.lastRecv.Store(s.now())
		if first != (h.typ == frameSettings) {
			s.violation(fmt.Errorf("SETTINGS must be the first frame and only the first (got type 0x%x)", uint8(h.typ)))
			return
		}
		first = false
		stop, err := s.handle(h, payload)
		if err == errNotReading {
			s.closeWith(err, false)
			return
		}
		if err != nil {
			s.violation(err)
			return
		}
		if stop {
			return
		}
		if s.q.pending() {
			s.kick()
		}
	}
}

// readFailed ends the session after the underlying connection failed
// (or was closed by us, in which case the session already ended).
func (s *Session) readFailed(err error) {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = errors.New("connection closed by the peer without a CLOSE frame")
	}
	s.closeWith(lostBy("read", err), false)
}

// violation ends the session after the peer broke the protocol, telling
// it why in a CLOSE frame.
func (s *Session) violation(err error) {
	s.closeWith(lost("protocol violation: %v", err), true)
}

// handle applies one frame. stop says the session ended cleanly (a CLOSE).
func (s *Session) handle(h header, p []byte) (stop bool, err error) {
	if h.typ == frameClose {
		s.handleClose(h, p)
		return true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	since := s.q.addedBytes()
	defer func() {
		if err == nil && s.q.chargeCtrl(since) {
			err = errNotReading
		}
	}()
	switch h.typ {
	case frameSettings:
		s.handleSettingsLocked(parseSettings(p))
		return false, nil
	case frameConnWindow:
		if v := binary.BigEndian.Uint64(p); v > s.connSendMax {
			s.connSendMax = v
			broadcast(&s.creditC)
		}
		return false, nil
	case frameMaxStreams:
		k := bidi
		if h.flags&flagUni != 0 {
			k = uni
		}
		if v := min(binary.BigEndian.Uint64(p), maxStreamLimit); v > s.local[k].peerMax {
			s.local[k].peerMax = v
			broadcast(&s.openC)
		}
		return false, nil
	case framePing:
		return false, s.handlePingLocked(h, p)
	}
	recvSide := h.typ == frameData || h.typ == frameReset
	st, err := s.streamForFrameLocked(h.stream, recvSide)
	if err != nil {
		return false, err
	}
	switch h.typ {
	case frameData:
		return false, s.handleDataLocked(st, h, p)
	case frameWindow:
		if v := binary.BigEndian.Uint64(p); st != nil && v > st.sendMax {
			st.sendMax = v
			signal(st.writeC)
		}
	case frameReset:
		if st != nil && !st.recvOver {
			st.recvErr = &transport.StreamError{Code: transport.StreamErrorCode(binary.BigEndian.Uint64(p)), Remote: true}
			st.dropUnreadLocked()
			st.recvOver = true
			signal(st.readC)
			s.maybeRemoveLocked(st)
		}
	case frameStopSending:
		if st != nil && !st.sendOver {
			code := binary.BigEndian.Uint64(p)
			st.sendErr = &transport.StreamError{Code: transport.StreamErrorCode(code), Remote: true}
			s.q.add(func(b []byte) []byte { return appendU64Frame(b, frameReset, 0, st.id, code) })
			st.endSendLocked(st.sendErr)
		}
	}
	return false, nil
}

func (s *Session) handleClose(h header, p []byte) {
	code, msg := binary.BigEndian.Uint64(p), string(p[8:])
	if h.flags&flagProtocol != 0 {
		s.closeWith(lost("the peer reported a protocol violation: %s", msg), false)
		return
	}
	s.closeWith(&transport.ApplicationError{Code: transport.ApplicationErrorCode(code), Message: msg, Remote: true}, false)
}

func (s *Session) handleSettingsLocked(ss []setting) {
	for _, st := range ss {
		switch st.id {
		case settingStreamWindow:
			s.peerWindow = st.value
		case settingConnWindow:
			s.connSendMax = st.value
		case settingMaxBidi, settingMaxUni:
			k := int(st.id - settingMaxBidi)
			s.local[k].peerMax = min(st.value, maxStreamLimit)
			s.local[k].none = st.value == 0
		}
	}
	s.peerSettings = true
	broadcast(&s.creditC)
	broadcast(&s.openC)
}

// errNotReading ends a session whose peer keeps sending frames that need
// an answer while it does not read ours: they would pile up without bound.
var errNotReading = lost("the peer does not read what we send (over %d bytes of answers queued)", ctrlLimit)

func (s *Session) handlePingLocked(h header, p []byte) error {
	v := binary.BigEndian.Uint64(p)
	if h.flags&flagAck == 0 {
		s.q.add(func(b []byte) []byte { return appendU64Frame(b, framePing, flagAck, 0, v) })
		return nil
	}
	if sent := int64(v); sent >= 0 && sent <= s.now() {
		s.rtt.Store(s.now() - sent)
	}
	return nil
}

// streamForFrameLocked finds the stream a frame is about, opening the
// peer's streams up to it. A nil stream with a nil error is one that
// is over and forgotten: its frame is dropped.
func (s *Session) streamForFrameLocked(id uint64, recvSide bool) (*stream, error) {
	k := int(id>>1) & 1
	num := id >> 2
	if s.isLocal(id) {
		if num >= s.local[k].next {
			return nil, fmt.Errorf("frame for stream %d, which we have not opened", id)
		}
		if k == uni && recvSide {
			return nil, fmt.Errorf("data or reset on our unidirectional stream %d", id)
		}
		return s.streams[id], nil
	}
	if k == uni && !recvSide {
		return nil, fmt.Errorf("window or stop-sending on the peer's unidirectional stream %d", id)
	}
	rk := &s.remote[k]
	if num >= rk.next {
		if num >= rk.max {
			return nil, fmt.Errorf("stream limit violated: stream %d opened, limit %d streams", id, rk.max)
		}
		for ; rk.next <= num; rk.next++ {
			st := s.newStreamLocked(s.streamID(rk.next, k, !s.isClient), false)
			rk.accept = append(rk.accept, st)
		}
		broadcast(&s.acceptC)
	}
	return s.streams[id], nil
}

func (s *Session) handleDataLocked(st *stream, h header, p []byte) error {
	n := uint64(len(p))
	if !s.connRecv.onData(n) {
		return fmt.Errorf("flow control violated: the connection received %d bytes beyond its limit %d", s.connRecv.received+n-s.connRecv.limit, s.connRecv.limit)
	}
	if st == nil || st.readCancelled {
		// A stream over and forgotten, or one we stopped reading: drop.
		s.connConsumedLocked(n, time.Now(), time.Duration(s.rtt.Load()))
		putData(p)
		return nil
	}
	if st.fin || st.recvErr != nil {
		return fmt.Errorf("data on stream %d after its FIN or reset", st.id)
	}
	if !st.rw.onData(n) {
		return fmt.Errorf("flow control violated on stream %d: %d bytes beyond its limit %d", st.id, st.rw.received+n-st.rw.limit, st.rw.limit)
	}
	if n > 0 {
		st.chunks = append(st.chunks, p)
		st.unread += n
	} else {
		putData(p)
	}
	if h.flags&flagFIN != 0 {
		st.fin = true
		if st.unread == 0 {
			st.recvOver = true
			s.maybeRemoveLocked(st)
		}
	}
	signal(st.readC)
	return nil
}

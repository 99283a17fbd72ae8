package mux

import (
	"time"
)

// timerLoop ends the session after MaxIdleTimeout without a frame from
// the peer, and pings every KeepAlive while nothing arrives, so an idle
// peer keeps the session alive (its answer resets our idle timer, our
// ping resets its).
func (s *Session) timerLoop() {
	idle := int64(s.cfg.MaxIdleTimeout)
	keepAlive := int64(s.cfg.KeepAlive)
	first := s.cfg.MaxIdleTimeout
	if keepAlive > 0 {
		first = min(first, s.cfg.KeepAlive)
	}
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		now := s.now()
		last := s.lastRecv.Load()
		if now-last >= idle {
			s.closeWith(errIdle, false)
			return
		}
		next := last + idle
		if keepAlive > 0 {
			since := max(last, s.lastPing.Load())
			if now-since >= keepAlive {
				s.mu.Lock() // every adder but the read loop holds it (chargeCtrl)
				s.q.add(func(b []byte) []byte { return appendU64Frame(b, framePing, 0, 0, uint64(now)) })
				s.mu.Unlock()
				s.lastPing.Store(now)
				s.kick()
				since = now
			}
			next = min(next, since+keepAlive)
		}
		t.Reset(time.Duration(next - now))
	}
}

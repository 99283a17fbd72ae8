package broker

import (
	"fmt"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/quictr"
)

// listen opens the client listeners, the one place that names a
// transport: QUIC on Config.ListenAddr today. A TLS-over-TCP listener is
// added here and gets its own accept loop (startAccept), served by the
// same code. The first listener is the QUIC one.
func (s *Server) listen() ([]transport.Listener, error) {
	ln, err := quictr.Listen(s.cfg.ListenAddr, s.tls, s.transportConfig())
	if err != nil {
		return nil, fmt.Errorf("broker: listen %s: %w", s.cfg.ListenAddr, err)
	}
	return []transport.Listener{ln}, nil
}

// closeAll closes every listener of lns.
func closeAll(lns []transport.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

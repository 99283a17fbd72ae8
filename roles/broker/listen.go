package broker

import (
	"fmt"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/dual"
)

// listen opens the client listeners, the one place that names a
// transport: QUIC on Config.ListenAddr and, unless Config.TCPListenAddr is
// "off", TLS over TCP on it (by default the QUIC listener's port number).
// Each gets its own accept loop (startAccept), served by the same code.
// The first listener is the QUIC one.
func (s *Server) listen() ([]transport.Listener, error) {
	lns, err := dual.Listen(s.cfg.ListenAddr, s.cfg.TCPListenAddr, s.tls, s.transportConfig())
	if err != nil {
		return nil, fmt.Errorf("broker: %w (FELIX_BROKER_ADDR, FELIX_TCP_LISTEN)", err)
	}
	return lns, nil
}

// closeAll closes every listener of lns.
func closeAll(lns []transport.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

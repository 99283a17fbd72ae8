package peer

import (
	"context"
	"crypto/tls"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/dual"
)

// listen and dial are where peer links meet the transports. An endpoint
// listens on both, QUIC and TLS over TCP on the same port number, and
// dials the one Config.Transport names, so two nodes configured
// differently still link.
func listen(addr string, tlsConf *tls.Config, cfg transport.Config) ([]transport.Listener, error) {
	return dual.Listen(addr, "", tlsConf, cfg)
}

func (e *Endpoint) dial(ctx context.Context, addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Conn, error) {
	return dual.Dial(ctx, e.cfg.Transport, addr, tlsConf, cfg)
}

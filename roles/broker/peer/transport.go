package peer

import (
	"context"
	"crypto/tls"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/quictr"
)

// listen and dial are where peer links meet a transport: QUIC today.
// A second transport (TLS over TCP) is wired in here, and only here.
func listen(addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Listener, error) {
	return quictr.Listen(addr, tlsConf, cfg)
}

func dial(ctx context.Context, addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Conn, error) {
	return quictr.Dial(ctx, addr, tlsConf, cfg)
}

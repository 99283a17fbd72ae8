package felix

import (
	"context"
	"crypto/tls"
	"errors"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/quictr"
)

// The values of Config.Transport.
const (
	TransportQUIC = "quic"
	TransportTCP  = "tcp"
	TransportAuto = "auto"
)

// errTCPNotBuilt is Connect's answer to Transport "tcp" or "auto" until
// the TCP transport is wired in.
var errTCPNotBuilt = errors.New("felix: transport tcp: not built yet")

// dialFunc opens a connection to a broker.
type dialFunc func(ctx context.Context, addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Conn, error)

// dialerFor is the one place that maps Config.Transport (validated) onto
// a transport's dialer.
func dialerFor(kind string) (dialFunc, error) {
	switch kind {
	case TransportQUIC, "":
		return quictr.Dial, nil
	default:
		return nil, errTCPNotBuilt
	}
}

package felix

import (
	"context"
	"crypto/tls"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/dual"
)

// The values of Config.Transport.
const (
	TransportQUIC = "quic"
	TransportTCP  = "tcp"
	TransportAuto = "auto"
)

// defaultTransport is Config.Transport's default: QUIC. The package's
// tests set it to run their suite over each transport.
var defaultTransport = TransportQUIC

// DefaultAutoFallback is how long Transport "auto" gives a QUIC handshake
// before it tries TCP as well.
const DefaultAutoFallback = time.Second

// autoChoice remembers, for the life of a client and every connection it
// makes (a cluster client's too), the transport "auto" found working: the
// first connection races QUIC against a delayed TCP, later ones dial the
// winner directly, and race again only if the winner fails.
type autoChoice struct{ kind atomic.Value } // transport.Kind

func (a *autoChoice) get() transport.Kind {
	k, _ := a.kind.Load().(transport.Kind)
	return k
}

// dial opens a connection to cfg.Addr (TCP: cfg.TCPAddr when set) over the
// transport cfg.Transport names.
func dial(ctx context.Context, cfg Config, tlsConf *tls.Config) (transport.Conn, error) {
	tc := transportConfig(cfg)
	switch cfg.Transport {
	case TransportTCP:
		return dual.Dial(ctx, transport.TCP, cfg.tcpAddr(), tlsConf, tc)
	case TransportAuto:
		if k := cfg.auto.get(); k != "" {
			addr := cfg.Addr
			if k == transport.TCP {
				addr = cfg.tcpAddr()
			}
			if c, err := dual.Dial(ctx, k, addr, tlsConf, tc); err == nil {
				return c, nil
			}
		}
		c, err := dual.DialAuto(ctx, cfg.Addr, cfg.tcpAddr(), cfg.AutoFallback, tlsConf, tc)
		if err == nil {
			cfg.auto.kind.Store(c.Kind())
		}
		return c, err
	}
	return dual.Dial(ctx, transport.QUIC, cfg.Addr, tlsConf, tc)
}

// tcpAddr is where TCP reaches the broker: TCPAddr, else Addr (a broker's
// TCP listener shares its QUIC port unless configured otherwise).
func (c Config) tcpAddr() string {
	if c.TCPAddr != "" {
		return c.TCPAddr
	}
	return c.Addr
}

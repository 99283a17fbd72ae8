package felix

import (
	"crypto/tls"
	"os"
	"testing"

	"github.com/felixmq/felix/internal/transporttest"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/quictr"
	"github.com/felixmq/felix/transport/tcptr"
)

// testTransport is the transport of this run: the suite runs once over
// each, with Config.Transport defaulting to it and the fakes listening on
// it.
var testTransport transport.Kind

func TestMain(m *testing.M) {
	os.Exit(transporttest.Main(m, func(k transport.Kind) {
		testTransport, defaultTransport = k, string(k)
	}))
}

// listenTest listens on a free loopback port over the run's transport.
func listenTest(tlsConf *tls.Config, cfg transport.Config) (transport.Listener, error) {
	if testTransport == transport.TCP {
		return tcptr.Listen("127.0.0.1:0", tlsConf, cfg)
	}
	return quictr.Listen("127.0.0.1:0", tlsConf, cfg)
}

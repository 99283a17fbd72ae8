package broker

import (
	"os"
	"testing"

	"github.com/felixmq/felix/internal/transporttest"
	"github.com/felixmq/felix/transport"
)

// testTransport is what the test clients of this run dial: the suite runs
// once over each transport (a broker listens on both at one port number).
var testTransport transport.Kind

func TestMain(m *testing.M) {
	os.Exit(transporttest.Main(m, func(k transport.Kind) { testTransport = k }))
}

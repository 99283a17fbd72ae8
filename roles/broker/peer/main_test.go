package peer

import (
	"os"
	"testing"

	"github.com/felixmq/felix/internal/transporttest"
	"github.com/felixmq/felix/transport"
)

// testTransport is what the endpoints of this run dial over: the suite
// runs once over each transport (every endpoint accepts both).
var testTransport transport.Kind

func TestMain(m *testing.M) {
	os.Exit(transporttest.Main(m, func(k transport.Kind) { testTransport = k }))
}

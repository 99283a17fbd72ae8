package bench

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// replication is what `felix bench durable` asks of its stream's copies:
// the replication factor and the consistency of its acknowledgements. The
// zero value leaves both to the control plane (its
// FELIX_DEFAULT_REPLICATION_FACTOR, and leader acks).
type replication struct {
	factor      int    // copies of each shard, the leader's included; 0: the default
	consistency string // "leader" or "quorum"; "": the default (leader)
}

// maxBenchReplicas bounds --replication-factor; the control plane checks
// its own limit too.
const maxBenchReplicas = 15

// replicationFlags are the flags of the durable scenario that set its
// stream's copies.
func replicationFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "replication-factor", Usage: "copies of each shard of the bench stream, the leader's included " +
			"(default: the control plane's FELIX_DEFAULT_REPLICATION_FACTOR; felix dev sets min(3, nodes))"},
		&cli.StringFlag{Name: "consistency", Usage: "what an ack waits for on the bench stream: leader or quorum (a majority " +
			"of the replica set holds the batch)", DefaultText: "leader"},
	}
}

// parseReplication checks the replication flags of c.
func parseReplication(c *cli.Context) (replication, error) {
	return newReplication(c.Int("replication-factor"), c.String("consistency"))
}

func newReplication(factor int, consistency string) (replication, error) {
	if factor < 0 || factor > maxBenchReplicas {
		return replication{}, fmt.Errorf("--replication-factor %d: want 1..%d", factor, maxBenchReplicas)
	}
	switch consistency {
	case "", "leader", "quorum":
	default:
		return replication{}, fmt.Errorf("--consistency %q: want leader or quorum", consistency)
	}
	return replication{factor: factor, consistency: consistency}, nil
}

// addTo sets the stream-create fields of a REST body; nothing for the zero
// value, so the request stays as it was.
func (r replication) addTo(body map[string]any) {
	if r.factor > 0 {
		body["replication_factor"] = r.factor
	}
	if r.consistency != "" {
		body["consistency"] = r.consistency
	}
}

// addParams records the replication in a result's parameters.
func (r replication) addParams(params map[string]any) {
	if r.factor > 0 {
		params["replication_factor"] = r.factor
	}
	if r.consistency != "" {
		params["consistency"] = r.consistency
	}
}

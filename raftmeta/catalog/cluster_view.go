package catalog

import (
	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/raftmeta/fsm"
	"github.com/felixmq/felix/wire"
)

// ClusterState is what a broker routes by, read in one transaction: the
// broker registry without the deregistered brokers, and the placement.
// ShardsOwned is not counted (it would read every assignment).
type ClusterState struct {
	Brokers []wire.Broker
	PlacementState
}

// ClusterState reads the brokers and the placement's revision and
// generation counter, and with withAssignments every assignment too, in
// one transaction. Without them the read is cheap (no assignment is
// decoded): enough to tell whether anything a broker routes by changed,
// since every placement change bumps the revision.
func (c *Catalog) ClusterState(withAssignments bool) (ClusterState, error) {
	var st ClusterState
	err := c.db.View(func(tx *bolt.Tx) error {
		all, err := brokersIn(tx)
		if err != nil {
			return err
		}
		for _, br := range all {
			if br.State != wire.BrokerDeregistered {
				st.Brokers = append(st.Brokers, br)
			}
		}
		if withAssignments {
			st.PlacementState, err = placementState(tx)
			return err
		}
		b := tx.Bucket(catPlacementBucket)
		st.LastGeneration, st.Revision = fsm.GetU64(b.Get(lastGenerationKey)), fsm.GetU64(b.Get(revisionKey))
		return nil
	})
	return st, err
}

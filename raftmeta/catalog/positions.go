package catalog

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

// Position reports: the positions bucket holds, per node id, the last
// positions the broker's heartbeats reported (node id -> BrokerPositions
// as JSON). They sit beside the broker record, not in it, so that the
// registry and the cluster view, read on every broker's poll, never
// decode them; only placement and the replication report read them.
//
// A report is stamped with the storage identity the broker was
// registered with when it arrived. A registration under another identity
// moves the current report to Previous: it no longer says what the
// broker holds, but it stays the last word of a leader that lost its
// storage (placement compares its followers' copies against it).

var catPositionsBucket = []byte("positions")

// BrokerPositions is what the catalog keeps of one broker's position
// reports.
type BrokerPositions struct {
	NodeID string `json:"node_id"`
	// Current is the broker's last report; its StorageID is empty while
	// the broker has not reported since it registered under a new
	// identity.
	Current wire.PositionReport `json:"current"`
	// Previous is the last report made under the identity the broker
	// had before its latest change of identity, if it made any.
	Previous *wire.PositionReport `json:"previous,omitempty"`
}

// positionsOf reads node's record (zero when it has none).
func (w *writer) positionsOf(node string) (BrokerPositions, error) {
	rec := BrokerPositions{NodeID: node}
	raw := w.tx.Bucket(catPositionsBucket).Get([]byte(node))
	if raw == nil {
		return rec, nil
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("positions of broker %q: %w", node, err)
	}
	return rec, nil
}

func (w *writer) putPositions(rec BrokerPositions) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return w.tx.Bucket(catPositionsBucket).Put([]byte(rec.NodeID), raw)
}

// recordPositions keeps a heartbeat's report, stamped with storageID
// (the identity the broker is registered with) at atMs.
func (w *writer) recordPositions(node, storageID string, atMs int64, ps []wire.ShardPosition) error {
	rec, err := w.positionsOf(node)
	if err != nil {
		return err
	}
	if len(ps) == 0 && rec.Current.StorageID == "" && rec.Previous == nil {
		return nil // nothing reported, nothing kept: no record
	}
	rotatePositions(&rec, storageID)
	rec.Current = wire.PositionReport{StorageID: storageID, AtMs: atMs, Positions: ps}
	return w.putPositions(rec)
}

// positionsNewIdentity is a registration's effect on node's reports: under
// a new storage identity the current report becomes the previous one.
func (w *writer) positionsNewIdentity(node, storageID string) error {
	rec, err := w.positionsOf(node)
	if err != nil || rec.Current.StorageID == "" || rec.Current.StorageID == storageID {
		return err
	}
	rotatePositions(&rec, storageID)
	return w.putPositions(rec)
}

// rotatePositions moves rec's current report to Previous when it was made
// under another identity than storageID.
func rotatePositions(rec *BrokerPositions, storageID string) {
	if cur := rec.Current; cur.StorageID != "" && cur.StorageID != storageID {
		rec.Previous = &cur
		rec.Current = wire.PositionReport{}
	}
}

// positionsIn returns every broker's reports, in node id order.
func positionsIn(tx *bolt.Tx) ([]BrokerPositions, error) {
	var out []BrokerPositions
	err := tx.Bucket(catPositionsBucket).ForEach(func(k, v []byte) error {
		var rec BrokerPositions
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("positions of broker %q: %w", k, err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// Positions returns every broker's kept position reports, in node id
// order.
func (c *Catalog) Positions() ([]BrokerPositions, error) {
	var out []BrokerPositions
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = positionsIn(tx)
		return err
	})
	return out, err
}

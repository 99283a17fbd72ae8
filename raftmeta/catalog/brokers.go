package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

// The broker registry: one record per node id in the brokers bucket
// (node id -> wire.Broker as JSON). Records are never removed: a
// deregistered broker keeps its record, so its heartbeat is refused by
// name rather than as an unknown node. Every time in a record was stamped
// by the proposer; Apply only compares the times commands carry.

// Broker registry operations.
const (
	opRegisterBroker   = "broker_register"
	opHeartbeatBroker  = "broker_heartbeat"
	opMarkBrokerDown   = "broker_down"
	opDeregisterBroker = "broker_deregister"
	opFinalizeFeatures = "fleet_finalize"
)

// MaxBrokers bounds the registry: a registration of a new node id beyond
// it is refused (deregistered records count too).
const MaxBrokers = 1000

var (
	catBrokersBucket = []byte("brokers")
	// catFleetBucket holds the feature gate: "finalized/<feature>" -> "1",
	// and fleetRegisteredKey once any broker has registered.
	catFleetBucket     = []byte("fleet")
	fleetRegisteredKey = []byte("registered")
)

func finalizedKey(feature string) []byte { return []byte("finalized/" + feature) }

// brokerCmd is the body of a registry command.
type brokerCmd struct {
	Reg       *wire.BrokerRegistration `json:"reg,omitempty"`
	NodeID    string                   `json:"node_id,omitempty"`
	StorageID string                   `json:"storage_id,omitempty"`
	// AtMs is the proposer's clock (Unix ms) when it made the command.
	AtMs int64 `json:"at_ms,omitempty"`
	// SeenHeartbeatMs (mark down) is the last heartbeat the leader judged
	// too old: a broker whose record has a newer one is left live.
	SeenHeartbeatMs int64    `json:"seen_hb_ms,omitempty"`
	Features        []string `json:"features,omitempty"`
	// Suspects (heartbeat) are the leaders the broker reports silent.
	Suspects []wire.ShardSuspect `json:"suspects,omitempty"`
	// Positions (heartbeat) are how far it holds each shard's log; kept
	// in the positions bucket (positions.go), at most wire.MaxPositions.
	Positions []wire.ShardPosition `json:"positions,omitempty"`
}

// CmdRegisterBroker encodes a broker's registration at atMs (Unix ms, the
// proposer's clock). The result is the broker's record as JSON.
func CmdRegisterBroker(reg wire.BrokerRegistration, atMs int64) []byte {
	return encodeCmd(catalogCmd{Op: opRegisterBroker, Broker: &brokerCmd{Reg: &reg, AtMs: atMs}})
}

// CmdHeartbeatBroker encodes a heartbeat of a live broker at atMs. The
// result is the broker's record as JSON.
func CmdHeartbeatBroker(nodeID, storageID string, atMs int64, suspects ...wire.ShardSuspect) []byte {
	return encodeCmd(catalogCmd{Op: opHeartbeatBroker, Broker: &brokerCmd{NodeID: nodeID, StorageID: storageID, AtMs: atMs, Suspects: suspects}})
}

// CmdHeartbeatBrokerReport encodes a heartbeat carrying its suspects and
// its positions (kept as the broker's latest report, stamped with the
// storage identity it is registered with; see Positions). The result is
// the broker's record as JSON.
func CmdHeartbeatBrokerReport(hb wire.BrokerHeartbeat, atMs int64) []byte {
	return encodeCmd(catalogCmd{Op: opHeartbeatBroker, Broker: &brokerCmd{NodeID: hb.NodeID, StorageID: hb.StorageID, AtMs: atMs,
		Suspects: hb.Suspects, Positions: hb.Positions}})
}

// CmdMarkBrokerDown encodes the leader's verdict that a live (or
// draining) broker whose
// last heartbeat was seenHeartbeatMs has expired, at atMs. The result is
// "1" when it was marked down, "0" when it was no longer live or had
// heartbeated since.
func CmdMarkBrokerDown(nodeID string, seenHeartbeatMs, atMs int64) []byte {
	return encodeCmd(catalogCmd{Op: opMarkBrokerDown, Broker: &brokerCmd{NodeID: nodeID, SeenHeartbeatMs: seenHeartbeatMs, AtMs: atMs}})
}

// CmdDeregisterBroker encodes an operator's removal of a broker from the
// fleet.
func CmdDeregisterBroker(nodeID string) []byte {
	return encodeCmd(catalogCmd{Op: opDeregisterBroker, Broker: &brokerCmd{NodeID: nodeID}})
}

// CmdFinalizeFeatures encodes turning fleet features on; none means every
// supported one. It is refused, naming the feature and the brokers, when
// a live or draining broker lacks one.
func CmdFinalizeFeatures(features []string) []byte {
	return encodeCmd(catalogCmd{Op: opFinalizeFeatures, Broker: &brokerCmd{Features: features}})
}

func (w *writer) applyBrokerCmd(cmd catalogCmd) ([]byte, error) {
	b := cmd.Broker
	if b == nil {
		return nil, badCommand(cmd.Op + " needs a body")
	}
	switch cmd.Op {
	case opRegisterBroker:
		return w.registerBroker(b)
	case opHeartbeatBroker:
		return w.heartbeatBroker(b)
	case opMarkBrokerDown:
		return w.markBrokerDown(b)
	case opDeregisterBroker:
		return nil, w.deregisterBroker(b)
	}
	return nil, w.finalizeFeatures(b.Features)
}

func (w *writer) broker(id string) (wire.Broker, bool, error) {
	raw := w.tx.Bucket(catBrokersBucket).Get([]byte(id))
	if raw == nil {
		return wire.Broker{}, false, nil
	}
	var br wire.Broker
	if err := json.Unmarshal(raw, &br); err != nil {
		return br, false, fmt.Errorf("broker %q: %w", id, err)
	}
	return br, true, nil
}

func (w *writer) putBroker(br wire.Broker) ([]byte, error) {
	raw, err := json.Marshal(br)
	if err != nil {
		return nil, err
	}
	return raw, w.tx.Bucket(catBrokersBucket).Put([]byte(br.NodeID), raw)
}

func (w *writer) registerBroker(b *brokerCmd) ([]byte, error) {
	reg := b.Reg
	if reg == nil || reg.NodeID == "" || reg.StorageID == "" || len(reg.ClientAddrs) == 0 {
		return nil, badCommand("broker_register needs a node id, a storage id and a client address")
	}
	old, has, err := w.broker(reg.NodeID)
	if err != nil {
		return nil, err
	}
	if reg.CrashedStorageID == reg.StorageID {
		return nil, badCommand("broker_register: the crashed storage id is the storage id")
	}
	// A broker back from a crash under a new identity before it was
	// marked down names the one it replaced: not a duplicate.
	if has && old.State.Serving() && old.StorageID != reg.StorageID && reg.CrashedStorageID != old.StorageID {
		return nil, conflict(fmt.Sprintf("duplicate node id: broker %q is %s with storage identity %s, and this one has %s; "+
			"give each broker its own FELIX_NODE_ID, or wait until the other is marked down",
			reg.NodeID, old.State, old.StorageID, reg.StorageID))
	}
	if !has && w.tx.Bucket(catBrokersBucket).Stats().KeyN >= MaxBrokers {
		return nil, conflict(fmt.Sprintf("broker %q: the registry holds %d brokers, the most it keeps", reg.NodeID, MaxBrokers))
	}
	if missing := w.missingFinalized(reg.Features); len(missing) > 0 {
		return nil, conflict(fmt.Sprintf("broker %q lacks the finalized fleet feature(s) %v: a broker must implement every finalized feature", reg.NodeID, missing))
	}
	if err := w.finalizeOnFirstRegistration(reg.Features); err != nil {
		return nil, err
	}
	if err := w.positionsNewIdentity(reg.NodeID, reg.StorageID); err != nil {
		return nil, err
	}
	br := wire.Broker{BrokerRegistration: *reg, State: wire.BrokerLive, Registrations: old.Registrations + 1,
		RegisteredAtMs: b.AtMs, LastHeartbeatMs: b.AtMs, ShardsOwned: old.ShardsOwned}
	if has && br.CrashedStorageID == "" && old.StorageID == reg.StorageID {
		// Registering again under the identity it took after a crash (a
		// heartbeat refused, a restart in the same boot) keeps the crash
		// on the record until placement no longer needs it.
		br.CrashedStorageID = old.CrashedStorageID
	}
	br.Features = slices.Clone(reg.Features)
	slices.Sort(br.Features)
	br.Features = slices.Compact(br.Features)
	return w.putAndAnswer(br)
}

// putAndAnswer stores br and answers with it and the finalized features
// (which the stored record does not hold).
func (w *writer) putAndAnswer(br wire.Broker) ([]byte, error) {
	if _, err := w.putBroker(br); err != nil {
		return nil, err
	}
	br.FinalizedFeatures = finalizedIn(w.tx)
	return json.Marshal(br)
}

// finalizedIn returns the finalized features, in name order.
func finalizedIn(tx *bolt.Tx) []string {
	out := []string{}
	prefix := finalizedKey("")
	cur := tx.Bucket(catFleetBucket).Cursor()
	for k, _ := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = cur.Next() {
		out = append(out, string(k[len(prefix):]))
	}
	return out
}

// missingFinalized returns the finalized features not in features.
func (w *writer) missingFinalized(features []string) []string {
	var missing []string
	for _, f := range finalizedIn(w.tx) {
		if !slices.Contains(features, f) {
			missing = append(missing, f)
		}
	}
	return missing
}

// finalizeOnFirstRegistration applies the spec's rule for a new cluster
// (no stream or cache ever created, no broker registered before): the
// first registration finalizes every known feature the broker reports,
// except publisher_principal, which grows every record and stays an
// operator step.
func (w *writer) finalizeOnFirstRegistration(features []string) error {
	fleet := w.tx.Bucket(catFleetBucket)
	if fleet.Get(fleetRegisteredKey) != nil {
		return nil
	}
	if err := fleet.Put(fleetRegisteredKey, []byte(resultTrue)); err != nil {
		return err
	}
	if w.tx.Bucket(logBucket(wire.KindStreams)).Sequence() != 0 || w.tx.Bucket(logBucket(wire.KindCaches)).Sequence() != 0 {
		return nil // an existing cluster: the operator finalizes
	}
	for _, f := range features {
		if f == wire.FleetPublisherPrincipal || !wire.KnownFleetFeature(f) {
			continue
		}
		if err := fleet.Put(finalizedKey(f), []byte(resultTrue)); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) heartbeatBroker(b *brokerCmd) ([]byte, error) {
	br, has, err := w.broker(b.NodeID)
	switch {
	case err != nil:
		return nil, err
	case !has:
		return nil, notFound(fmt.Sprintf("broker %q is not registered: register before heartbeating", b.NodeID))
	case br.State == wire.BrokerDeregistered:
		return nil, conflict(fmt.Sprintf("broker %q was deregistered: it must register again", b.NodeID))
	case br.State == wire.BrokerDown:
		return nil, conflict(fmt.Sprintf("broker %q was marked down (no heartbeat since %d ms): it must register again", b.NodeID, br.LastHeartbeatMs))
	case b.StorageID != br.StorageID:
		return nil, conflict(fmt.Sprintf("broker %q is registered with storage identity %s, not %s: a stale or duplicate broker", b.NodeID, br.StorageID, b.StorageID))
	case len(b.Positions) > wire.MaxPositions:
		return nil, badCommand(fmt.Sprintf("broker %q reported %d positions; at most %d", b.NodeID, len(b.Positions), wire.MaxPositions))
	}
	if b.AtMs >= br.LastHeartbeatMs {
		// A late copy neither moves the time back nor brings back what
		// a newer heartbeat no longer suspects, or older positions.
		br.LastHeartbeatMs = b.AtMs
		br.Suspects = b.Suspects
		if err := w.recordPositions(b.NodeID, br.StorageID, b.AtMs, b.Positions); err != nil {
			return nil, err
		}
	}
	return w.putAndAnswer(br)
}

func (w *writer) markBrokerDown(b *brokerCmd) ([]byte, error) {
	br, has, err := w.broker(b.NodeID)
	if err != nil || !has || !br.State.Serving() || br.LastHeartbeatMs != b.SeenHeartbeatMs {
		return []byte(resultFalse), err
	}
	br.State, br.DownAtMs = wire.BrokerDown, b.AtMs
	_, err = w.putBroker(br)
	return []byte(resultTrue), err
}

func (w *writer) deregisterBroker(b *brokerCmd) error {
	br, has, err := w.broker(b.NodeID)
	if err != nil {
		return err
	}
	if !has {
		return notFound(fmt.Sprintf("broker %q is not registered", b.NodeID))
	}
	br.State = wire.BrokerDeregistered
	_, err = w.putBroker(br)
	return err
}

func (w *writer) finalizeFeatures(features []string) error {
	brokers, err := brokersIn(w.tx)
	if err != nil {
		return err
	}
	view := fleetView(w.tx, brokers)
	want := features
	if len(want) == 0 {
		for _, f := range view.Features {
			if f.Supported {
				want = append(want, f.Name)
			}
		}
	}
	for _, name := range want {
		i := slices.IndexFunc(view.Features, func(f wire.FleetFeature) bool { return f.Name == name })
		switch {
		case !wire.KnownFleetFeature(name):
			return notFound(fmt.Sprintf("fleet feature %q is unknown (known: %v)", name, wire.FleetFeatures))
		case !view.Features[i].Supported && len(view.Features[i].Missing) > 0:
			return conflict(fmt.Sprintf("fleet feature %q cannot be finalized: live broker(s) %v lack it", name, view.Features[i].Missing))
		case !view.Features[i].Supported:
			return conflict(fmt.Sprintf("fleet feature %q cannot be finalized: no broker is live", name))
		}
	}
	for _, name := range want {
		if err := w.tx.Bucket(catFleetBucket).Put(finalizedKey(name), []byte(resultTrue)); err != nil {
			return err
		}
	}
	return nil
}

// brokersIn returns every broker record, in node id order.
func brokersIn(tx *bolt.Tx) ([]wire.Broker, error) {
	var out []wire.Broker
	err := tx.Bucket(catBrokersBucket).ForEach(func(k, v []byte) error {
		var br wire.Broker
		if err := json.Unmarshal(v, &br); err != nil {
			return fmt.Errorf("broker %q: %w", k, err)
		}
		out = append(out, br)
		return nil
	})
	return out, err
}

// fleetView computes the feature gate: each known feature (and any
// finalized one this release does not know), whether every serving
// broker reports it, and whether it is finalized.
func fleetView(tx *bolt.Tx, brokers []wire.Broker) wire.FleetFeaturesView {
	names := slices.Clone(wire.FleetFeatures)
	fleet := tx.Bucket(catFleetBucket)
	for _, f := range finalizedIn(tx) {
		if !slices.Contains(names, f) {
			names = append(names, f)
		}
	}
	view := wire.FleetFeaturesView{Features: make([]wire.FleetFeature, 0, len(names))}
	for _, name := range names {
		f := wire.FleetFeature{Name: name, Finalized: fleet.Get(finalizedKey(name)) != nil}
		serving := 0
		for _, br := range brokers {
			if !br.State.Serving() {
				continue
			}
			serving++
			if !slices.Contains(br.Features, name) {
				f.Missing = append(f.Missing, br.NodeID)
			}
		}
		f.Supported = serving > 0 && len(f.Missing) == 0
		view.Features = append(view.Features, f)
	}
	return view
}

// Brokers returns every broker record, in node id order, with the number
// of shards placed on each.
func (c *Catalog) Brokers() ([]wire.Broker, error) {
	var out []wire.Broker
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		if out, err = brokersIn(tx); err != nil {
			return err
		}
		owned, err := shardsOwned(tx)
		for i := range out {
			out[i].ShardsOwned = owned[out[i].NodeID]
		}
		return err
	})
	return out, err
}

// FleetFeatures returns the fleet-wide feature gate.
func (c *Catalog) FleetFeatures() (wire.FleetFeaturesView, error) {
	var view wire.FleetFeaturesView
	err := c.db.View(func(tx *bolt.Tx) error {
		brokers, err := brokersIn(tx)
		view = fleetView(tx, brokers)
		return err
	})
	return view, err
}

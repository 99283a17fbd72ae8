package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/raftmeta/fsm"
	"github.com/felixmq/felix/wire"
)

// Shard assignments: the placement bucket holds one record per shard of
// every stream and cache ("shard/<kind>/<tenant>/<ns>/<name>/<shard, ten
// decimal digits>" -> wire.ShardAssignment as JSON), the cluster-wide
// generation counter (lastGenerationKey) and the placement revision
// (revisionKey), a counter bumped by every applied placement command.
// Only the control-plane leader's placement loop writes them, with
// CmdApplyPlacement; Apply never reads a clock.

const opApplyPlacement = "placement_apply"

// MaxPlacementChanges bounds the assignments one placement command puts
// and drops together.
const MaxPlacementChanges = 1 << 20

var (
	catPlacementBucket = []byte("placement")
	lastGenerationKey  = []byte("last_generation")
	revisionKey        = []byte("revision")
	shardKeyPrefix     = "shard/"
)

// ShardKey names one shard's assignment record.
type ShardKey struct {
	Kind      string `json:"kind"`
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Shard     uint32 `json:"shard"`
}

// KeyOf is the key of a's record.
func KeyOf(a wire.ShardAssignment) ShardKey {
	return ShardKey{Kind: a.Kind, TenantID: a.TenantID, Namespace: a.Namespace, Name: a.Name, Shard: a.Shard}
}

// resourcePrefix is the record key prefix of one resource's shards.
func resourcePrefix(kind, tenant, ns, name string) string {
	return shardKeyPrefix + kind + "/" + CatalogKey(tenant, ns, name) + "/"
}

func (k ShardKey) bytes() []byte {
	return fmt.Appendf(nil, "%s%010d", resourcePrefix(k.Kind, k.TenantID, k.Namespace, k.Name), k.Shard)
}

func (k ShardKey) valid() bool {
	return (k.Kind == wire.PlacementStream || k.Kind == wire.PlacementCache) &&
		k.TenantID != "" && k.Namespace != "" && k.Name != ""
}

// PlacementChange is one placement pass's result, applied atomically: the
// records to write and to remove and the counter after them. It is
// applied only if the placement is still the one it was computed from
// (revision and generation counter unchanged), so two leaders' passes
// never interleave: a stale one is refused with ErrConflict and computed
// again.
type PlacementChange struct {
	// ExpectRevision and ExpectLastGeneration are the placement's
	// revision and generation counter the pass read.
	ExpectRevision       uint64 `json:"expect_revision"`
	ExpectLastGeneration uint64 `json:"expect_last_generation"`
	// LastGeneration is the counter afterwards: at least the expected one
	// and every generation in Put.
	LastGeneration uint64                 `json:"last_generation"`
	Put            []wire.ShardAssignment `json:"put,omitempty"`
	Drop           []ShardKey             `json:"drop,omitempty"`
}

// PlacementState is the whole placement: every assignment (in key order:
// kind, tenant, namespace, name, shard), the generation counter and the
// revision.
type PlacementState struct {
	Assignments    []wire.ShardAssignment
	LastGeneration uint64
	Revision       uint64
}

// CmdApplyPlacement encodes a placement pass's change. The result is the
// new revision in decimal.
func CmdApplyPlacement(ch PlacementChange) []byte {
	return encodeCmd(catalogCmd{Op: opApplyPlacement, Placement: &ch})
}

func (w *writer) applyPlacement(ch *PlacementChange) ([]byte, error) {
	if ch == nil {
		return nil, badCommand(opApplyPlacement + " needs a body")
	}
	if len(ch.Put)+len(ch.Drop) > MaxPlacementChanges {
		return nil, badCommand(fmt.Sprintf("%d placement changes; at most %d", len(ch.Put)+len(ch.Drop), MaxPlacementChanges))
	}
	b := w.tx.Bucket(catPlacementBucket)
	rev, gen := fsm.GetU64(b.Get(revisionKey)), fsm.GetU64(b.Get(lastGenerationKey))
	if rev != ch.ExpectRevision || gen != ch.ExpectLastGeneration {
		return nil, conflict(fmt.Sprintf("stale placement: computed from revision %d, generation %d; the placement is at revision %d, generation %d",
			ch.ExpectRevision, ch.ExpectLastGeneration, rev, gen))
	}
	if ch.LastGeneration < gen {
		return nil, badCommand(fmt.Sprintf("generation counter %d would go back from %d", ch.LastGeneration, gen))
	}
	for _, k := range ch.Drop {
		if err := b.Delete(k.bytes()); err != nil {
			return nil, err
		}
	}
	for _, a := range ch.Put {
		if err := putAssignment(b, a, ch.LastGeneration); err != nil {
			return nil, err
		}
	}
	rev++
	if err := b.Put(revisionKey, fsm.U64Key(rev)); err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "%d", rev), b.Put(lastGenerationKey, fsm.U64Key(ch.LastGeneration))
}

func putAssignment(b *bolt.Bucket, a wire.ShardAssignment, lastGen uint64) error {
	k := KeyOf(a)
	switch {
	case !k.valid():
		return badCommand(fmt.Sprintf("assignment %+v: kind, tenant, namespace and name are required", k))
	case a.Generation > lastGen:
		return badCommand(fmt.Sprintf("assignment %+v: generation %d above the counter %d", k, a.Generation, lastGen))
	case a.NodeID == "" && a.Unavailable != wire.UnavailableNotAssigned:
		return badCommand(fmt.Sprintf("assignment %+v: no owner, and not %s", k, wire.UnavailableNotAssigned))
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return b.Put(k.bytes(), raw)
}

// placementIn reads the records whose key starts with prefix.
func placementIn(tx *bolt.Tx, prefix string) ([]wire.ShardAssignment, error) {
	var out []wire.ShardAssignment
	cur := tx.Bucket(catPlacementBucket).Cursor()
	p := []byte(prefix)
	for k, v := cur.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = cur.Next() {
		var a wire.ShardAssignment
		if err := json.Unmarshal(v, &a); err != nil {
			return nil, fmt.Errorf("assignment %q: %w", k, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Placement returns the whole placement, read in one transaction.
func (c *Catalog) Placement() (PlacementState, error) {
	var st PlacementState
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		st, err = placementState(tx)
		return err
	})
	return st, err
}

func placementState(tx *bolt.Tx) (PlacementState, error) {
	b := tx.Bucket(catPlacementBucket)
	as, err := placementIn(tx, shardKeyPrefix)
	return PlacementState{Assignments: as, LastGeneration: fsm.GetU64(b.Get(lastGenerationKey)),
		Revision: fsm.GetU64(b.Get(revisionKey))}, err
}

// ResourcePlacement returns the assignments of one stream or cache (kind
// wire.PlacementStream or wire.PlacementCache), in shard order, and the
// generation counter.
func (c *Catalog) ResourcePlacement(kind, tenant, ns, name string) ([]wire.ShardAssignment, uint64, error) {
	var (
		out []wire.ShardAssignment
		gen uint64
	)
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = placementIn(tx, resourcePrefix(kind, tenant, ns, name))
		gen = fsm.GetU64(tx.Bucket(catPlacementBucket).Get(lastGenerationKey))
		return err
	})
	return out, gen, err
}

// PlacementInput is what a placement pass reads, all from one
// transaction: the brokers, their position reports, every stream and
// cache, and the placement.
type PlacementInput struct {
	Brokers []wire.Broker
	// Positions are the brokers' kept position reports, by node id
	// (deregistered brokers' too).
	Positions []BrokerPositions
	Streams   []wire.StreamSpec
	Caches    []wire.CacheSpec
	PlacementState
}

// PlacementInput reads a placement pass's input in one transaction.
func (c *Catalog) PlacementInput() (PlacementInput, error) {
	var in PlacementInput
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		if in.Brokers, err = brokersIn(tx); err != nil {
			return err
		}
		if in.Positions, err = positionsIn(tx); err != nil {
			return err
		}
		if in.PlacementState, err = placementState(tx); err != nil {
			return err
		}
		return eachLive(tx, func(it wire.CatalogItem) {
			switch {
			case it.Stream != nil:
				in.Streams = append(in.Streams, *it.Stream)
			case it.Cache != nil:
				in.Caches = append(in.Caches, *it.Cache)
			}
		})
	})
	return in, err
}

// eachLive calls fn with every live stream and cache, streams first, in
// key order.
func eachLive(tx *bolt.Tx, fn func(wire.CatalogItem)) error {
	for _, kind := range []wire.CatalogKind{wire.KindStreams, wire.KindCaches} {
		err := tx.Bucket(liveBucket(kind)).ForEach(func(k, v []byte) error {
			it, err := decodeItem(v)
			if err != nil {
				return fmt.Errorf("%s %q: %w", kind, k, err)
			}
			fn(it)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// shardsOwned counts, per node id, the shards whose owner it is.
func shardsOwned(tx *bolt.Tx) (map[string]int, error) {
	as, err := placementIn(tx, shardKeyPrefix)
	n := make(map[string]int)
	for _, a := range as {
		if a.NodeID != "" {
			n[a.NodeID]++
		}
	}
	return n, err
}

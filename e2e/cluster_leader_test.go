package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// raftLeader returns the node whose control plane leads the Raft group,
// as `felix admin members list -o json` at a live member reports it.
func (d *devCluster) raftLeader(ctx context.Context) devNode {
	d.t.Helper()
	var leader devNode
	eventually(d.t, expiryWait, "a Raft leader", func() bool {
		for _, n := range d.nodes {
			out, _, code := d.felix(ctx, "admin", "members", "list", "-o", "json", "--controlplane", n.ControlPlaneURL)
			if code != 0 {
				continue
			}
			var m struct {
				Leader uint64 `json:"leader"`
			}
			if json.Unmarshal([]byte(out), &m) != nil || m.Leader == 0 {
				continue
			}
			for _, c := range d.nodes {
				if uint64(c.RaftID) == m.Leader {
					leader = c
					return true
				}
			}
		}
		return false
	})
	return leader
}

// placementAt runs `felix admin placement show` against one node's
// control plane; false when it does not answer.
func (d *devCluster) placementAt(ctx context.Context, n devNode, args ...string) (wire.PlacementView, bool) {
	var v wire.PlacementView
	out, _, code := d.felix(ctx, append([]string{"admin", "placement", "show", "--controlplane", n.ControlPlaneURL}, append(args, "-o", "json")...)...)
	return v, code == 0 && json.Unmarshal([]byte(out), &v) == nil
}

// settledOwners reports whether v gives every one of shards shards
// exactly one serving owner with a generation; why not otherwise.
func settledOwners(v wire.PlacementView, shards int) string {
	if len(v.Shards) != shards {
		return fmt.Sprintf("%d shards listed, want %d", len(v.Shards), shards)
	}
	seen := map[uint32]bool{}
	for _, a := range v.Shards {
		switch {
		case seen[a.Shard]:
			return fmt.Sprintf("shard %d listed twice", a.Shard)
		case a.NodeID == "" || a.Unavailable != "" || a.Generation == 0:
			return fmt.Sprintf("shard %d not served: %+v", a.Shard, a)
		}
		seen[a.Shard] = true
	}
	return ""
}

// Streams created while the control plane's Raft leader is killed are
// all placed once the node is back: every shard of every stream has
// exactly one owner, every control plane member shows the same owners,
// every broker answers shard_owners with them, and a shard whose owner
// changed did so under a new generation.
func TestClusterPlacementSurvivesAControlPlaneLeaderChange(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const streams, shards = 8, 6
	name := func(i int) string { return fmt.Sprintf("s%d", i) }
	leader := d.raftLeader(ctx)

	// Create the streams, killing the leader's node after the second
	// create has started. A create that fails while the group elects a
	// new leader is sent again (conflict: the first one did land).
	var wg sync.WaitGroup
	createErrs := make(chan error, streams)
	second := make(chan struct{})
	wg.Go(func() {
		for i := range streams {
			if i == 2 {
				close(second)
			}
			cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
			for {
				out, errOut, code := d.felix(cctx, "admin", "stream", "create", name(i), "--shards", fmt.Sprint(shards))
				if code == 0 || strings.Contains(errOut, "code conflict") {
					break
				}
				if cctx.Err() != nil {
					createErrs <- fmt.Errorf("create %s: exit %d: %s %s", name(i), code, out, errOut)
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			ccancel()
		}
	})
	<-second
	d.kill9(leader.Name)
	wg.Wait()
	close(createErrs)
	for err := range createErrs {
		t.Fatal(err)
	}
	newLeader := d.raftLeader(ctx)
	if newLeader.Name == leader.Name {
		t.Fatalf("%s still leads after its kill", leader.Name)
	}

	// Placement finishes without the dead node's broker, then with it.
	before := map[string]wire.PlacementView{}
	for i := range streams {
		eventually(t, expiryWait, name(i)+" placed without "+leader.Name, func() bool {
			v, ok := d.placementAt(ctx, newLeader, name(i))
			before[name(i)] = v
			return ok && settledOwners(v, shards) == ""
		})
	}
	d.restart(leader.Name)
	eventually(t, expiryWait, leader.NodeID+" live again", func() bool { return d.brokers(ctx)[leader.NodeID].State == wire.BrokerLive })

	// Every member agrees, and every broker answers the same owners.
	token := d.adminToken()
	clients := map[string]*felix.Client{}
	for _, n := range d.nodes {
		clients[n.Name] = d.connect(ctx, n.Name, token)
	}
	for i := range streams {
		var why string
		var agreed wire.PlacementView
		eventually(t, expiryWait, name(i)+" settled on every member and broker", func() bool {
			why = agreement(ctx, d, clients, name(i), shards, &agreed)
			return why == ""
		})
		if why != "" {
			t.Fatalf("%s: %s", name(i), why)
		}
		for _, a := range agreed.Shards {
			was := ownerOf(before[name(i)], a.Shard)
			var wasGen uint64
			for _, b := range before[name(i)].Shards {
				if b.Shard == a.Shard {
					wasGen = b.Generation
				}
			}
			if was != a.NodeID && a.Generation <= wasGen {
				t.Errorf("%s shard %d moved from %s to %s without a new generation (%d, was %d)", name(i), a.Shard, was, a.NodeID, a.Generation, wasGen)
			}
		}
	}
}

// agreement checks that every member's placement of stream settles each
// shard on one owner, that all members show the same owners and
// generations, and that every broker's shard_owners answer matches
// them; it returns what disagrees ("" when nothing), the agreed
// placement in agreed.
func agreement(ctx context.Context, d *devCluster, clients map[string]*felix.Client, stream string, shards int, agreed *wire.PlacementView) string {
	var ref wire.PlacementView
	for i, n := range d.nodes {
		v, ok := d.placementAt(ctx, n, stream)
		if !ok {
			return n.Name + "'s control plane does not answer placement show"
		}
		if why := settledOwners(v, shards); why != "" {
			return n.Name + ": " + why
		}
		if i == 0 {
			ref = v
			continue
		}
		for _, a := range v.Shards {
			for _, r := range ref.Shards {
				if a.Shard == r.Shard && (a.NodeID != r.NodeID || a.Generation != r.Generation) {
					return fmt.Sprintf("shard %d: %s shows %s@%d, %s shows %s@%d", a.Shard, n.Name, a.NodeID, a.Generation, d.nodes[0].Name, r.NodeID, r.Generation)
				}
			}
		}
	}
	for _, n := range d.nodes {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		owners, err := clients[n.Name].ShardOwners(octx, "default", stream, felix.KindStream)
		cancel()
		if err != nil {
			return fmt.Sprintf("shard_owners at %s: %v", n.Name, err)
		}
		if len(owners) != shards {
			return fmt.Sprintf("shard_owners at %s: %d shards", n.Name, len(owners))
		}
		for _, o := range owners {
			for _, r := range ref.Shards {
				if o.Shard == r.Shard && (o.NodeID != r.NodeID || o.Generation != r.Generation || o.Unavailable != "") {
					return fmt.Sprintf("shard %d: broker %s answers %s@%d (%s), the control plane %s@%d", o.Shard, n.Name, o.NodeID, o.Generation, o.Unavailable, r.NodeID, r.Generation)
				}
			}
		}
	}
	*agreed = ref
	return ""
}

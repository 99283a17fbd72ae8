package broker

import (
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/wire"
)

// A silence a regular heartbeat carries first is counted, once, even when
// the promotion it brings about resets the entry before watchSilence
// would have seen it (the e2e link-fault test saw the counter miss it).
func TestASilenceAHeartbeatReportsFirstIsCountedOnce(t *testing.T) {
	r := newReplication(metrics.NewSet())
	r.suspectAfter = time.Second
	ref := shardRef{kind: wire.ShardKindStream, tenant: "t", ns: "n", name: "s", shard: 0}
	r.heard[ref] = heard{leader: "broker-a", generation: 1, at: time.Now().Add(-2 * time.Second)}
	for range 2 {
		if got := r.suspects(); len(got) != 1 || got[0].Leader != "broker-a" {
			t.Fatalf("suspects %+v, want broker-a", got)
		}
	}
	delete(r.heard, ref) // a new view: this broker leads the shard now
	if n := r.suspectsReported.Get(); n != 1 {
		t.Fatalf("felix_replication_leaders_suspected_total = %d, want 1", n)
	}
	// Heard again, then silent again: a new report, counted again.
	r.heard[ref] = heard{leader: "broker-a", generation: 1, at: time.Now()}
	r.noteHeard(ref, "broker-a", 1)
	r.mu.Lock()
	h := r.heard[ref]
	h.at = time.Now().Add(-2 * time.Second)
	r.heard[ref] = h
	r.mu.Unlock()
	r.suspects()
	if n := r.suspectsReported.Get(); n != 2 {
		t.Fatalf("felix_replication_leaders_suspected_total = %d after a second silence, want 2", n)
	}
}

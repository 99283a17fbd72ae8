package e2e

import (
	"strings"
	"testing"

	flog "github.com/felixmq/felix/log"
)

// goodHistory is a history every invariant holds in: two shards, shard 0
// failed over once (a generation start at offset 2), acknowledged,
// refused and outcome-unknown publishes (one unknown landed, one did
// not), a subscriber per shard that saw everything, and three copies of
// each shard, one of them behind.
func goodHistory() *history {
	ack := func(shard uint32, p string, off uint64) pubAttempt {
		return pubAttempt{client: "c0", shard: shard, payload: p, outcome: pubAcked, offset: off}
	}
	data := func(off, gen uint64, p string) storedRecord {
		return storedRecord{Offset: off, Kind: flog.KindData, Generation: gen, TimeMicros: 100 + off, Payload: p}
	}
	genStart := func(off, gen uint64) storedRecord {
		return storedRecord{Offset: off, Kind: flog.KindGenerationStart, Generation: gen, TimeMicros: 100 + off}
	}
	shard0 := []storedRecord{data(0, 1, "a"), data(1, 1, "b"), genStart(2, 3), data(3, 3, "c"), data(4, 3, "u1")}
	shard1 := []storedRecord{data(0, 2, "x"), data(1, 2, "y")}
	return &history{
		attempts: []pubAttempt{
			ack(0, "a", 0), ack(0, "b", 1), ack(0, "c", 3), ack(1, "x", 0), ack(1, "y", 1),
			{client: "c1", shard: 0, payload: "u1", outcome: pubUnknown, err: "quorum_timeout"},
			{client: "c1", shard: 0, payload: "u2", outcome: pubUnknown, err: "context deadline exceeded"},
			{client: "c1", shard: 1, payload: "r1", outcome: pubRefused, err: "shard_unavailable"},
		},
		deliveries: []delivery{
			{sub: 0, shard: 0, offset: 0, payload: "a"}, {sub: 0, shard: 0, offset: 1, payload: "b"},
			{sub: 0, shard: 0, offset: 3, payload: "c", skipped: 1}, {sub: 0, shard: 0, offset: 4, payload: "u1"},
			{sub: 1, shard: 1, offset: 0, payload: "x"}, {sub: 1, shard: 1, offset: 1, payload: "y"},
		},
		final: map[uint32][]logRecord{
			0: {{0, "a"}, {1, "b"}, {3, "c"}, {4, "u1"}},
			1: {{0, "x"}, {1, "y"}},
		},
		copies: []shardCopyOf{
			{node: "node1", shard: 0, leader: true, records: shard0},
			{node: "node2", shard: 0, records: shard0},
			{node: "node3", shard: 0, records: shard0[:3]},
			{node: "node2", shard: 1, leader: true, records: shard1},
			{node: "node1", shard: 1, records: shard1},
			{node: "node3", shard: 1, records: shard1[:1]},
		},
	}
}

func TestHistoryCheckerPassesAGoodHistory(t *testing.T) {
	if v := goodHistory().check(); len(v) != 0 {
		t.Fatalf("a good history fails the checker:\n%s", strings.Join(v, "\n"))
	}
}

// Each bad history is the good one with one fault; the checker must
// report it under the invariant it breaks.
func TestHistoryCheckerFailsBadHistories(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(h *history)
		want  string // the start of a violation the checker must report
	}{
		{"lost ack", func(h *history) {
			h.final[1] = h.final[1][:1]
			h.copies[3].records = h.copies[3].records[:1]
		}, "invariant 1: c0's publish \"y\" acknowledged at shard 1 offset 1 is not in the final log"},
		{"ack at another offset", func(h *history) { h.attempts[2].offset = 2 }, "invariant 1: c0's publish \"c\" acknowledged at shard 0 offset 2 is in the final log at shard 0 offset 3"},
		{"ack on another shard", func(h *history) { h.attempts[0].shard = 1 }, "invariant 1: c0's publish \"a\" acknowledged at shard 1 offset 0"},
		{"duplicate of an ack", func(h *history) {
			h.final[0] = append(h.final[0], logRecord{5, "a"})
		}, "invariant 1: c0's publish \"a\" acknowledged at shard 0 offset 0 is in the final log 2 times"},
		{"duplicate of an unknown", func(h *history) {
			h.final[1] = append(h.final[1], logRecord{2, "u1"})
		}, "invariant 5: c1's publish \"u1\" (outcome unknown: quorum_timeout) is in the final log 2 times"},
		{"refused but written", func(h *history) {
			h.final[1] = append(h.final[1], logRecord{2, "r1"})
		}, "invariant 5: c1's publish \"r1\" was refused"},
		{"phantom record", func(h *history) {
			h.final[1] = append(h.final[1], logRecord{2, "nobody"})
		}, "invariant 5: the final log holds \"nobody\""},
		{"offset reuse by two leaders", func(h *history) {
			h.attempts = append(h.attempts, pubAttempt{client: "probe@node1", shard: 0, payload: "z", outcome: pubAcked, offset: 3})
		}, "invariant 2: shard 0 offset 3 holds \"c\" by the final log and \"z\" by probe@node1's acknowledgement"},
		{"aborted read", func(h *history) {
			h.deliveries = append(h.deliveries, delivery{sub: 1, shard: 1, offset: 2, payload: "u2"})
		}, "invariant 3: subscriber 1 was delivered \"u2\" at shard 1 offset 2; the final log holds \"\" there (present false)"},
		{"delivery of another record", func(h *history) { h.deliveries[1].payload = "u2" }, "invariant 3: subscriber 0 was delivered \"u2\" at shard 0 offset 1"},
		{"reorder", func(h *history) {
			h.deliveries[0], h.deliveries[1] = h.deliveries[1], h.deliveries[0]
		}, "invariant 4: subscriber 0 was delivered \"a\" at shard 0 offset 0 after offset 1: out of order"},
		{"repeat", func(h *history) {
			h.deliveries = append(h.deliveries, delivery{sub: 1, shard: 1, offset: 1, payload: "y"})
		}, "invariant 4: subscriber 1 was delivered \"y\" at shard 1 offset 1 after offset 1: out of order"},
		{"unexplained gap", func(h *history) { h.deliveries[2].skipped = 0 }, "invariant 4: subscriber 0 was delivered \"c\" at shard 0 offset 3 skipping 0 offsets, after offset 1"},
		{"skipped a record", func(h *history) {
			h.deliveries = append(h.deliveries[:4:4], delivery{sub: 1, shard: 1, offset: 1, payload: "y", skipped: 1})
		}, "invariant 4: subscriber 1 skipped shard 1 offset 0 before \"y\", which holds \"x\""},
		{"replica diverges", func(h *history) {
			c := append([]storedRecord(nil), h.copies[1].records...)
			c[3].Payload = "z"
			h.copies[1].records = c
		}, "invariant 6: shard 0: node2's copy is not a prefix of leader node1's: record 3"},
		{"replica ahead of its leader", func(h *history) {
			h.copies[3].records, h.copies[4].records = h.copies[3].records[:1], h.copies[3].records
			h.final[1] = h.final[1][:1]
			h.attempts[4].outcome = pubUnknown
		}, "invariant 6: shard 1: node1's copy is not a prefix of leader node2's: it holds 2 records, the leader 1"},
		{"replica at another offset", func(h *history) {
			c := append([]storedRecord(nil), h.copies[5].records...)
			c[0].Offset = 1
			h.copies[5].records = c
		}, "invariant 6: shard 1: node3's copy is not a prefix"},
		{"leader holds what it does not serve", func(h *history) {
			h.final[0] = h.final[0][:3]
			h.deliveries = h.deliveries[:3:3]
		}, "invariant 6: shard 0: leader node1's copy holds \"u1\" at offset 4, which it does not serve"},
		{"a gap that is no generation start", func(h *history) {
			c := append([]storedRecord(nil), h.copies[0].records...)
			c[2].Kind = flog.KindData
			h.copies[0].records = c
		}, "invariant 6: shard 0: leader node1's copy holds \"\" at offset 2, which it does not serve"},
		{"final log out of order", func(h *history) {
			h.final[1][0], h.final[1][1] = h.final[1][1], h.final[1][0]
		}, "invariant 5: shard 1's final log has offset 0 (\"x\") after 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := goodHistory()
			tc.spoil(h)
			v := h.check()
			for _, s := range v {
				if strings.HasPrefix(s, tc.want) {
					return
				}
			}
			t.Fatalf("the checker did not report %q; it reported:\n%s", tc.want, strings.Join(v, "\n"))
		})
	}
}

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// Writers on their own connections race PublishIf at the same expected
// offset of a durable stream on the real binary, round after round: each
// round exactly one is written and the others are refused with the new
// tail (the spec's `of_writers_racing_at_one_offset_exactly_one_wins`);
// the stream reads back with no gap and only the winners' records
// (`a_refused_publish_leaves_no_record_and_no_gap`). felix pub
// --if-offset agrees, and an in-memory stream is refused.
func TestPublishIfRacingWritersOneWinnerPerOffset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n := startServe(t)
	n.mustFelix(ctx, "admin", "stream", "create", "fenced", "--durable")
	n.mustFelix(ctx, "admin", "stream", "create", "loose")
	c := n.connect(ctx, n.adminToken())
	if c.ServerFeatures()&wire.FeaturePublishConditional == 0 {
		t.Fatalf("felix serve does not advertise FEATURE_PUBLISH_CONDITIONAL: %#x", c.ServerFeatures())
	}
	eventually(t, 15*time.Second, "the durable stream to reach the broker", func() bool {
		_, err := c.Read(ctx, "default", "fenced", 0, 0, nil, 1)
		return err == nil
	})

	const writers, rounds = 8, 50
	conns := make([]*felix.Client, writers)
	for i := range conns {
		conns[i] = n.connect(ctx, n.adminToken())
	}
	winners := make([]int, rounds)
	for round := range rounds {
		offs := make([]uint64, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w, cl := range conns {
			wg.Go(func() {
				<-start
				offs[w], errs[w] = cl.PublishIf(ctx, "default", "fenced", nil, [][]byte{fmt.Appendf(nil, "r%d-w%d", round, w)}, uint64(round))
			})
		}
		close(start)
		wg.Wait()
		winners[round] = -1
		for w, err := range errs {
			var om *felix.OffsetMismatchError
			switch {
			case err == nil:
				if winners[round] >= 0 {
					t.Fatalf("round %d: writers %d and %d both written", round, winners[round], w)
				}
				if offs[w] != uint64(round) {
					t.Fatalf("round %d: writer %d written at %d", round, w, offs[w])
				}
				winners[round] = w
			case errors.As(err, &om):
				if om.Tail != uint64(round+1) || om.Expected != uint64(round) {
					t.Fatalf("round %d: writer %d refused with tail %d (expected %d)", round, w, om.Tail, om.Expected)
				}
			default:
				t.Fatalf("round %d: writer %d: %v", round, w, err)
			}
		}
		if winners[round] < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
	}
	recs := readAll(ctx, t, c, "fenced", 0)
	if len(recs) != rounds {
		t.Fatalf("the stream holds %d records after %d rounds", len(recs), rounds)
	}
	for i, r := range recs {
		if want := fmt.Sprintf("r%d-w%d", i, winners[i]); r.Offset != uint64(i) || string(r.Payload) != want {
			t.Fatalf("record %d: %q at offset %d, want %q", i, r.Payload, r.Offset, want)
		}
	}

	// The CLI: a stale offset exits 3 naming the tail; the tail is written.
	out, errOut, code := n.felix(ctx, "pub", "fenced", "cli-late", "--if-offset", "3")
	if code != 3 || out != "" || !strings.Contains(errOut, fmt.Sprintf("at offset %d", rounds)) {
		t.Fatalf("felix pub --if-offset 3: exit %d stdout %q stderr %q", code, out, errOut)
	}
	if out := n.mustFelix(ctx, "pub", "fenced", "cli-a", "cli-b", "--if-offset", fmt.Sprint(rounds)); out != fmt.Sprintf("offset %d\noffset %d\n", rounds, rounds+1) {
		t.Fatalf("felix pub --if-offset %d: %q", rounds, out)
	}
	if recs := readAll(ctx, t, c, "fenced", 0); len(recs) != rounds+2 || string(recs[rounds].Payload) != "cli-a" {
		t.Fatalf("after the CLI the stream holds %d records", len(recs))
	}

	// An in-memory stream keeps no offsets to compare.
	var be *felix.BrokerError
	eventually(t, 15*time.Second, "the in-memory stream to reach the broker", func() bool {
		_, err := c.PublishIf(ctx, "default", "loose", nil, [][]byte{[]byte("x")}, 0)
		return errors.As(err, &be) && be.Detail["reason"] == "not_durable"
	})
}

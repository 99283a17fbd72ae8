package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/felixmq/felix/wire"
)

// Claims racing at one expected offset: exactly one is written, every
// other is refused with offset_mismatch naming the tail after the winner,
// and the log holds exactly the winner's batch there, round after round.
func TestClaimIfRacingExactlyOneWins(t *testing.T) {
	_, st := newDurableStream(t, t.TempDir(), Config{}, wire.StreamSpec{})
	sh, err := st.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 20
	for round := range uint64(rounds) {
		expected := round * 2 // every winner writes two records
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []int
			claims  []*Claimed
		)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := sh.ClaimIf([][]byte{fmt.Appendf(nil, "r%d-w%d-a", round, w), fmt.Appendf(nil, "r%d-w%d-b", round, w)}, "", expected)
				if err != nil {
					var we *wire.Error
					if !errors.As(err, &we) || we.Code != wire.CodeOffsetMismatch {
						t.Errorf("round %d writer %d: %v, want offset_mismatch", round, w, err)
						return
					}
					if tail, ok := we.OffsetMismatchTail(); !ok || tail != expected+2 {
						t.Errorf("round %d writer %d: tail %d %v, want %d", round, w, tail, ok, expected+2)
					}
					return
				}
				mu.Lock()
				winners = append(winners, w)
				claims = append(claims, c)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %v", round, len(winners), winners)
		}
		if claims[0].BaseOffset() != expected {
			t.Fatalf("round %d: written at %d, want %d", round, claims[0].BaseOffset(), expected)
		}
		if err := claims[0].Finish(context.Background()); err != nil {
			t.Fatal(err)
		}
		recs, next, err := sh.Read(expected, expected+2, 10, 1<<20)
		if err != nil || len(recs) != 2 || next != expected+2 {
			t.Fatalf("round %d: read %d records, next %d: %v", round, len(recs), next, err)
		}
		want := fmt.Sprintf("r%d-w%d-a", round, winners[0])
		if string(recs[0].Payload) != want || recs[0].Offset != expected {
			t.Fatalf("round %d: record %q at %d, want %q at %d", round, recs[0].Payload, recs[0].Offset, want, expected)
		}
	}
	if sh.NextOffset() != 2*rounds {
		t.Fatalf("next offset %d, want %d", sh.NextOffset(), 2*rounds)
	}
}

// A refused claim takes no offset: the next claim, conditional or not,
// gets the very next one.
func TestClaimIfRefusalLeavesNoGap(t *testing.T) {
	_, st := newDurableStream(t, t.TempDir(), Config{}, wire.StreamSpec{})
	sh, _ := st.Shard(0)
	for _, exp := range []uint64{1, 5, 1 << 40} {
		if _, err := sh.ClaimIf([][]byte{[]byte("x")}, "", exp); !errors.Is(err, &wire.Error{Code: wire.CodeOffsetMismatch}) {
			t.Fatalf("expected %d on an empty shard: %v", exp, err)
		}
	}
	c, err := sh.ClaimIf([][]byte{[]byte("first")}, "", 0)
	if err != nil || c.BaseOffset() != 0 {
		t.Fatalf("claim at 0: %v", err)
	}
	if err := c.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.ClaimIf([][]byte{[]byte("late")}, "", 0); err == nil {
		t.Fatal("a second claim at 0 was written")
	}
	c, err = sh.Claim([][]byte{[]byte("plain")}, "")
	if err != nil || c.BaseOffset() != 1 {
		t.Fatalf("plain claim after refusals: %v at %d, want 1", err, c.BaseOffset())
	}
	if err := c.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, _, err := sh.Read(0, 10, 10, 1<<20)
	if err != nil || len(recs) != 2 || string(recs[0].Payload) != "first" || string(recs[1].Payload) != "plain" {
		t.Fatalf("log holds %d records: %v", len(recs), err)
	}
}

// An in-memory shard has no offsets to compare: refused invalid_request,
// reason not_durable, and nothing published.
func TestClaimIfRefusedOnAnInMemoryShard(t *testing.T) {
	b := NewBroker(Config{})
	t.Cleanup(b.Close)
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "mem"}); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(StreamKey{"t", "ns", "mem"})
	sh, _ := st.Shard(0)
	_, err := sh.ClaimIf([][]byte{[]byte("x")}, "", 0)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeInvalidRequest || we.Reason() != "not_durable" {
		t.Fatalf("in-memory ClaimIf: %v", err)
	}
	if sh.NextOffset() != 0 {
		t.Fatalf("next offset %d", sh.NextOffset())
	}
}

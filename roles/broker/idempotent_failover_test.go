package broker

import (
	"fmt"
	"testing"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// resendUntilAnswered sends the idempotent batch seq of producer id to s
// until an answer other than a refusal that says the shard is not served
// yet (a takeover under way) comes back, and returns it.
func resendUntilAnswered(t *testing.T, s *tstream, stream string, id, seq uint64, payload string) wire.Message {
	t.Helper()
	var got wire.Message
	req := uint64(5000)
	waitFor(t, fmt.Sprintf("sequence %d to be answered", seq), func() bool {
		req++
		s.send(pubIdem(stream, req, id, seq, payload))
		got = s.recv()
		if pe, ok := got.(*wire.PublishError); ok {
			switch pe.Code {
			case wire.CodeShardUnavailable, wire.CodeNotLeader, wire.CodeNotFound:
				return false
			}
		}
		return true
	})
	return got
}

// TestAResendAfterAFailoverIsAnsweredFromTheNewLeadersTable: batches a
// producer published through broker-a, some copied to broker-c as it
// followed and some fetched by broker-c from broker-b while it took the
// shard over, are answered as duplicates at their first offsets when the
// producer sends them again to broker-c; its next sequence is appended.
func TestAResendAfterAFailoverIsAnsweredFromTheNewLeadersTable(t *testing.T) {
	envs := startReplicated(t, "i", "quorum", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, idemFeatures, pubAll)
	id := producerInit(t, s, "i")
	for seq := range uint64(5) {
		s.send(pubIdem("i", seq+1, id, seq, fmt.Sprint("p", seq)))
		wantWritten(t, s.recv(), seq+1, seq)
	}
	waitReplicated(t, envs[2], "i", 5)
	// broker-c stops copying: sequences 5-9 are held by a and b alone.
	unblockC := blockAppends(envs[2])
	for seq := uint64(5); seq < 10; seq++ {
		s.send(pubIdem("i", seq+1, id, seq, fmt.Sprint("p", seq)))
		wantWritten(t, s.recv(), seq+1, seq)
	}
	waitReplicated(t, envs[1], "i", 10)
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	unblockC()
	// broker-c is promoted, fetches 5-9 from b, and serves.
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("i", "quorum", "broker-c", 2))
	apply(envs[1], v)
	apply(envs[2], v)
	c := envs[2].authed(envs[2].dial(0), durableFlags, idemFeatures, pubAll)
	got := resendUntilAnswered(t, c, "i", id, 9, "p9")
	if ok, isOK := got.(*wire.PublishOK); !isOK || ok.Offset == nil || *ok.Offset != 9 {
		t.Fatalf("sequence 9 (fetched in the takeover) sent again: %#v", got)
	}
	c.send(pubIdem("i", 1, id, 2, "p2")) // copied while c followed
	wantWritten(t, c.recv(), 1, 2)
	c.send(pubIdem("i", 2, id, 10, "p10")) // the generation start took 10
	wantWritten(t, c.recv(), 2, 11)
	c.send(pubIdem("i", 3, id, 10, "p10"))
	wantWritten(t, c.recv(), 3, 11)
	c.send(pubIdem("i", 4, id, 3, "not p3"))
	wantProducerRefused(t, c.recv(), 4, wire.ReasonSequenceReused)
	st, _ := envs[2].srv.core.Stream(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "i"})
	sh, _ := st.Shard(0)
	recs, _, err := sh.Read(0, 100, 100, 0)
	if err != nil || len(recs) != 12 {
		t.Fatalf("broker-c serves %d records (%v)", len(recs), err)
	}
	for i, r := range recs {
		if i == 10 {
			continue
		}
		want := fmt.Sprint("p", i)
		if i == 11 {
			want = "p10"
		}
		if string(r.Payload) != want {
			t.Fatalf("record %d is %q, want %q", i, r.Payload, want)
		}
	}
}

// TestADuplicateAfterATakeoverWaitsForAMajority: a new leader answers a
// re-send of a batch an earlier leadership wrote only once a majority
// holds the new generation's start (as it serves reads), so the answer
// never vouches for a record a later failover could lose.
func TestADuplicateAfterATakeoverWaitsForAMajority(t *testing.T) {
	envs := startReplicated(t, "w", "quorum", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, idemFeatures, pubAll)
	id := producerInit(t, s, "w")
	for seq := range uint64(3) {
		s.send(pubIdem("w", seq+1, id, seq, fmt.Sprint("p", seq)))
		wantWritten(t, s.recv(), seq+1, seq)
	}
	waitReplicated(t, envs[1], "w", 3)
	waitReplicated(t, envs[2], "w", 3)
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	// broker-c takes no record: broker-b's generation start reaches no
	// majority while it is blocked.
	unblockC := blockAppends(envs[2])
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("w", "quorum", "broker-b", 2))
	apply(envs[1], v)
	apply(envs[2], v)
	b := envs[1].authed(envs[1].dial(0), durableFlags, idemFeatures, pubAll)
	got := resendUntilAnswered(t, b, "w", id, 2, "p2")
	if _, ok := got.(*wire.PublishOK); ok {
		t.Fatalf("a re-send was answered while no majority held the new generation: %#v", got)
	}
	if e := expectCode(t, got, wire.CodeQuorumTimeout); e.Retry != wire.RetryOutcomeUnknown {
		t.Fatalf("retry class %s", e.Retry)
	}
	unblockC()
	waitFor(t, "the re-send to be answered once c holds the generation start", func() bool {
		b.send(pubIdem("w", 9, id, 2, "p2"))
		m := b.recv()
		if ok, isOK := m.(*wire.PublishOK); isOK {
			if ok.Offset == nil || *ok.Offset != 2 {
				t.Fatalf("re-send answered %#v", m)
			}
			return true
		}
		expectCode(t, m, wire.CodeQuorumTimeout)
		return false
	})
	b.send(pubIdem("w", 10, id, 3, "p3"))
	wantWritten(t, b.recv(), 10, 4)
}

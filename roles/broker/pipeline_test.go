package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// pipeFeatures are a pipelining client's features.
const pipeFeatures = durableFeatures | wire.FeaturePublishPipeline

// keyFor finds a routing key of stream's shard on e.
func keyFor(t *testing.T, e *env, stream string, shard uint32) []byte {
	t.Helper()
	st, werr := e.srv.resolveStream(testTenant, "prod", stream)
	if werr != nil {
		t.Fatal(werr)
	}
	for i := range 1000 {
		k := fmt.Appendf(nil, "k%d", i)
		if st.ShardForKey(k) == shard {
			return k
		}
	}
	t.Fatalf("no key for shard %d of %s", shard, stream)
	return nil
}

func keyedPublish(stream string, key []byte, reqID uint64, payload []byte) []byte {
	p := wire.BinaryPublish{RequestID: reqID, TenantID: testTenant, Namespace: "prod", Stream: stream, Key: key, Payloads: [][]byte{payload}}
	return p.AppendFrame(nil, wire.PublishFlags(true, true))
}

// answerIDs reads n publish answers and returns their request ids.
func answerIDs(t *testing.T, s *tstream, n int) []uint64 {
	t.Helper()
	var ids []uint64
	for range n {
		switch m := s.recv().(type) {
		case *wire.PublishOK:
			ids = append(ids, m.RequestID)
		default:
			t.Fatalf("answer %#v", m)
		}
	}
	return ids
}

func TestAuthOKGrantsThePublishWindow(t *testing.T) {
	a, _ := startStandard(t)
	s := openStream(t, a.dial(0))
	ok, isOK := s.auth(testTenant, a.token(pubAll), 0, pipeFeatures).(*wire.AuthOK)
	if !isOK || ok.PublishWindow == nil || *ok.PublishWindow != 256 || ok.ServerFeatures&wire.FeaturePublishPipeline == 0 {
		t.Fatalf("auth_ok to a pipelining client: %#v", ok)
	}
	s = openStream(t, a.dial(0))
	if ok, isOK := s.auth(testTenant, a.token(pubAll), 0, durableFeatures).(*wire.AuthOK); !isOK || ok.PublishWindow != nil {
		t.Fatalf("auth_ok to a client that did not offer pipelining: %#v", ok)
	}
	off, _ := startPair(t, func(cfg *Config) { cfg.PublishWindow = 0 })
	s = openStream(t, off.dial(0))
	if ok, isOK := s.auth(testTenant, off.token(pubAll), 0, pipeFeatures).(*wire.AuthOK); !isOK || ok.PublishWindow != nil ||
		ok.ServerFeatures&wire.FeaturePublishPipeline != 0 {
		t.Fatalf("auth_ok with FELIX_BROKER_PUBLISH_WINDOW=0: %#v", ok)
	}
}

// The spec's a_pipelining_stream_is_answered_in_request_order: a publish
// the owner holds is answered before a later local one that finished
// first; a stream that did not ask for pipelining gets the local answer
// first.
func TestAPipeliningStreamIsAnsweredInRequestOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features uint64
		want     string
	}{{"pipelining", pipeFeatures, "[1 2]"}, {"not pipelining", durableFeatures, "[2 1]"}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := startStandard(t)
			release := make(chan struct{})
			entered, _ := holdFirstCall(t, b, release)
			s := a.authed(a.dial(0), durableFlags, tc.features, "stream.publish:*")
			s.write(binPublish("log", true, 1, []byte("forwarded, held")))
			<-entered
			local := a.metric("felix_publish_messages_total")
			s.write(keyedPublish("keyed", keyFor(t, a, "keyed", 0), 2, []byte("local")))
			waitFor(t, "the local publish", func() bool { return a.metric("felix_publish_messages_total") > local })
			close(release)
			if got := fmt.Sprint(answerIDs(t, s, 2)); got != tc.want {
				t.Fatalf("answers %s, want %s", got, tc.want)
			}
		})
	}
}

// startWindowPair is startStandard with a publish_window of window.
func startWindowPair(t *testing.T, window int) (a, b *env) {
	t.Helper()
	a, b = startPair(t, func(cfg *Config) {
		cfg.Durable.StorageDir = t.TempDir()
		cfg.PublishWindow = window
	}, wire.StreamSpec{Stream: "log", Durable: true}, wire.StreamSpec{Stream: "keyed", Shards: 4}, wire.StreamSpec{Stream: "lost"})
	standard(a, b)
	return a, b
}

// The spec's a_full_window_stops_reading_until_an_answer_frees_a_slot.
func TestAFullWindowStopsReadingUntilAnAnswerFreesASlot(t *testing.T) {
	a, b := startWindowPair(t, 2)
	release := make(chan struct{})
	entered, _ := holdFirstCall(t, b, release)
	s := a.authed(a.dial(0), durableFlags, pipeFeatures, "stream.publish:*")
	s.write(binPublish("log", true, 1, []byte("held")))
	<-entered
	s.write(binPublish("log", true, 2, []byte("queued behind it")))
	local := a.metric("felix_publish_messages_total")
	s.write(keyedPublish("keyed", keyFor(t, a, "keyed", 0), 3, []byte("beyond the window")))
	// Both slots are taken: the third is not read, so not published.
	time.Sleep(200 * time.Millisecond)
	if got := a.metric("felix_publish_messages_total"); got != local {
		t.Fatalf("a publish beyond a full window was read and published (%v -> %v)", local, got)
	}
	close(release)
	if got := fmt.Sprint(answerIDs(t, s, 3)); got != "[1 2 3]" {
		t.Fatalf("answers %s", got)
	}
}

// The spec's a_stuck_stream_does_not_stall_another_on_the_same_connection.
func TestAStuckStreamDoesNotStallAnotherOnTheSameConnection(t *testing.T) {
	a, b := startWindowPair(t, 2)
	release := make(chan struct{})
	entered, _ := holdFirstCall(t, b, release)
	qc := a.dial(0)
	stuck := a.authed(qc, durableFlags, pipeFeatures, "stream.publish:*")
	stuck.write(binPublish("log", true, 1, []byte("held")))
	<-entered
	stuck.write(binPublish("log", true, 2, []byte("queued")))
	stuck.write(binPublish("log", true, 3, []byte("beyond its window")))
	other := a.authed(qc, durableFlags, pipeFeatures, "stream.publish:*")
	key := keyFor(t, a, "keyed", 0)
	for i := range 5 {
		other.write(keyedPublish("keyed", key, uint64(10+i), []byte("free")))
	}
	if got := fmt.Sprint(answerIDs(t, other, 5)); got != "[10 11 12 13 14]" {
		t.Fatalf("the other stream's answers %s", got)
	}
	close(release)
	if got := fmt.Sprint(answerIDs(t, stuck, 3)); got != "[1 2 3]" {
		t.Fatalf("the stuck stream's answers %s", got)
	}
}

package core

import (
	"bytes"
	"sync"
	"testing"

	"github.com/felixmq/felix/wire"
)

func TestEncodeOncePerFlagsAcross50Subscribers(t *testing.T) {
	b, st := newTestStream(t, Config{}, 1, "")
	sh := shard0(t, st)
	subs := make([]*Subscriber, 50)
	for i := range subs {
		subs[i] = subscribe(t, sh, SubscribeOptions{})
	}
	publish(t, sh, payloads(8, "x"))

	flagSets := []uint16{
		0,
		wire.FlagEventBatchOffsets,
		wire.FlagBinaryEventBatchShared,
		wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets | wire.FlagEventBatchTimestamps | wire.FlagEventBatchPublisher,
	}
	before := metricValue(t, b, "felix_event_frames_encoded_total")
	frames := make([][][]byte, len(subs))
	var envs []*Envelope
	var wg sync.WaitGroup
	for i, s := range subs {
		e, ok := s.TryNext()
		if !ok {
			t.Fatalf("subscriber %d got nothing", i)
		}
		envs = append(envs, e)
		wg.Go(func() {
			for _, f := range flagSets {
				frames[i] = append(frames[i], e.Frame(f))
			}
		})
	}
	wg.Wait()
	if got := metricValue(t, b, "felix_event_frames_encoded_total") - before; got != float64(len(flagSets)) {
		t.Fatalf("encoded %v frames for %d flag sets", got, len(flagSets))
	}
	for i := range subs {
		if envs[i] != envs[0] {
			t.Fatal("subscribers got different envelopes for one batch")
		}
		for j := range flagSets {
			if &frames[i][j][0] != &frames[0][j][0] {
				t.Fatalf("subscriber %d flags %#x: frame bytes not shared", i, flagSets[j])
			}
		}
	}
}

func TestFrameJSONVariants(t *testing.T) {
	key := StreamKey{"t", "ns", "s"}
	e := newEnvelope(&key, [][]byte{[]byte("a"), []byte("bc")}, 7, "pub", testNow)

	m := parseJSONFrame(t, e.Frame(0))
	if m.TenantID != "t" || m.Namespace != "ns" || m.Stream != "s" || len(m.Payloads) != 2 || string(m.Payloads[1]) != "bc" {
		t.Fatalf("plain JSON frame: %+v", m)
	}
	if m.BaseOffset != nil {
		t.Errorf("plain JSON frame carries base_offset %d", *m.BaseOffset)
	}
	m = parseJSONFrame(t, e.Frame(wire.FlagEventBatchOffsets))
	if m.BaseOffset == nil || *m.BaseOffset != 7 {
		t.Errorf("JSON frame with offsets: base_offset %v", m.BaseOffset)
	}
}

func parseJSONFrame(t *testing.T, b []byte) *wire.EventBatch {
	t.Helper()
	h, err := wire.ParseFrameHeader(b)
	if err != nil || h.Flags != 0 || int(h.Length) != len(b)-wire.HeaderLen {
		t.Fatalf("header %+v err %v (frame %d bytes)", h, err, len(b))
	}
	msg, err := wire.ParseMessage(b[wire.HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	m, ok := msg.(*wire.EventBatch)
	if !ok {
		t.Fatalf("decoded %T", msg)
	}
	return m
}

func TestFrameBinaryShared(t *testing.T) {
	key := StreamKey{"t", "ns", "s"}
	e := newEnvelope(&key, [][]byte{[]byte("a"), []byte("bc")}, 7, "pub", testNow)
	flags := wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets | wire.FlagEventBatchTimestamps | wire.FlagEventBatchPublisher
	b := e.Frame(flags)
	h, err := wire.ParseFrameHeader(b)
	if err != nil || h.Flags != flags {
		t.Fatalf("header %+v err %v", h, err)
	}
	got, err := wire.ParseSharedEventBatch(flags, b[wire.HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	if got.BaseOffset != 7 || got.Publisher != "pub" || len(got.Payloads) != 2 || !bytes.Equal(got.Payloads[1], []byte("bc")) {
		t.Fatalf("decoded %+v", got)
	}
	if want := uint64(testNow.UnixMicro()); got.Timestamps[0] != want || got.Timestamps[1] != want {
		t.Errorf("timestamps %v want %d", got.Timestamps, want)
	}
}

func TestSuffixEnvelope(t *testing.T) {
	key := StreamKey{"t", "ns", "s"}
	e := newEnvelope(&key, payloads(5, "p"), 10, "pub", testNow)
	if e.suffixFrom(10) != e {
		t.Error("suffix from the base offset should be the envelope itself")
	}
	s := e.suffixFrom(12)
	if s.BaseOffset != 12 || s.Len() != 3 || string(s.Payloads[0]) != "p-2" || s.Size() != 9+3*PayloadOverhead {
		t.Errorf("suffix: base %d len %d first %q size %d", s.BaseOffset, s.Len(), s.Payloads[0], s.Size())
	}
}

package broker

import (
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/felixmq/felix/wire"
)

func httpStatus(h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

func jsonFrame(s string) []byte { return wire.AppendFrame(nil, 0, []byte(s)) }

func TestBadInput(t *testing.T) {
	cfg := testConfig()
	cfg.MaxFrameBytes = 64 << 10
	e := startEnv(t, cfg, wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	healthy := e.dial(0)
	events := e.subscribe(healthy, e.authed(healthy, 0, allFeatures, pubAll), "events")
	hpub := e.authed(healthy, 0, allFeatures, pubAll)
	served := 0
	stillServed := func(t *testing.T) {
		t.Helper()
		hpub.write(binPublish("events", true, uint64(served), numbered(served)))
		if _, ok := hpub.recv().(*wire.PublishOK); !ok {
			t.Fatal("the healthy client was not answered")
		}
		if got := events.payloads(1); string(got[0]) != string(numbered(served)) {
			t.Fatalf("healthy subscriber got %q", got[0])
		}
		served++
	}

	// Each of these refuses the stream after an error.
	closing := map[string][]byte{
		"garbage bytes": []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"wrong magic":   append(binary.BigEndian.AppendUint32(nil, 0xDEADBEEF), make([]byte, 8)...),
		"too long": binary.BigEndian.AppendUint32(
			wire.FrameHeader{Flags: 0, Length: 0}.Append(nil)[:8], 1<<30),
		"truncated binary publish": wire.AppendFrame(nil, wire.FlagBinaryPublishBatch, []byte{0, 5, 'a'}),
		"unknown binary flags":     wire.AppendFrame(nil, wire.FlagBinaryEventBatch, []byte{0, 0, 0, 0}),
		"unknown type, no feature": jsonFrame(`{"type":"teleport","request_id":1}`),
	}
	for name, frame := range closing {
		t.Run(name, func(t *testing.T) {
			s := e.authed(qc, 0, allFeatures&^uint64(wire.FeatureUnsupported), pubAll)
			s.write(frame)
			code := wire.CodeInvalidRequest
			if name == "unknown type, no feature" {
				code = wire.CodeUnsupported
			}
			expectCode(t, s.recv(), code)
			s.expectEnd()
			stillServed(t)
		})
	}

	// Each of these is answered and the stream keeps serving.
	kept := []struct {
		name  string
		frame []byte
		check func(t *testing.T, m wire.Message)
	}{
		{"invalid JSON", jsonFrame(`{"type":`), func(t *testing.T, m wire.Message) { expectCode(t, m, wire.CodeInvalidRequest) }},
		{"bad base64", jsonFrame(`{"type":"publish","tenant_id":"acme","namespace":"prod","stream":"events","payload":"!!!","request_id":5,"ack":"per_message"}`),
			func(t *testing.T, m wire.Message) {
				if pe := m.(*wire.PublishError); pe.RequestID != 5 || pe.Code != wire.CodeInvalidRequest {
					t.Fatalf("got %#v", pe)
				}
			}},
		{"missing field", jsonFrame(`{"type":"publish","tenant_id":"acme","namespace":"prod","payload":"eA==","request_id":6,"ack":"per_message"}`),
			func(t *testing.T, m wire.Message) {
				if pe := m.(*wire.PublishError); pe.RequestID != 6 || pe.Code != wire.CodeInvalidRequest {
					t.Fatalf("got %#v", pe)
				}
			}},
		{"missing cache key", jsonFrame(`{"type":"cache_get","tenant_id":"acme","namespace":"prod","cache":"sessions","request_id":9}`),
			func(t *testing.T, m wire.Message) { expectCode(t, m, wire.CodeInvalidRequest) }},
		{"unknown type with feature", jsonFrame(`{"type":"teleport","request_id":8}`), func(t *testing.T, m wire.Message) {
			u, ok := m.(*wire.Unsupported)
			if !ok || u.RequestType != "teleport" || u.RequestID == nil || *u.RequestID != 8 {
				t.Fatalf("got %#v", m)
			}
		}},
	}
	s := e.authed(qc, 0, allFeatures, pubAll)
	for _, k := range kept {
		t.Run(k.name, func(t *testing.T) {
			s.write(k.frame)
			k.check(t, s.recv())
			s.write(binPublish("events", true, 100, []byte("after")))
			if _, ok := s.recv().(*wire.PublishOK); !ok {
				t.Fatal("stream stopped serving")
			}
			events.payloads(1)
			stillServed(t)
		})
	}
}

package bench

import (
	"reflect"
	"testing"
)

func TestNewReplication(t *testing.T) {
	for _, bad := range []struct {
		factor      int
		consistency string
	}{{-1, ""}, {maxBenchReplicas + 1, ""}, {3, "majority"}} {
		if _, err := newReplication(bad.factor, bad.consistency); err == nil {
			t.Errorf("newReplication(%d, %q) = nil error", bad.factor, bad.consistency)
		}
	}
	r, err := newReplication(3, "quorum")
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"stream": "s"}
	r.addTo(body)
	want := map[string]any{"stream": "s", "replication_factor": 3, "consistency": "quorum"}
	if !reflect.DeepEqual(body, want) {
		t.Errorf("body %v, want %v", body, want)
	}
	// The zero value leaves the request as it was.
	body = map[string]any{"stream": "s"}
	replication{}.addTo(body)
	if len(body) != 1 {
		t.Errorf("zero replication added fields: %v", body)
	}
}

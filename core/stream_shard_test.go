package core

import (
	"strconv"
	"testing"

	"github.com/felixmq/felix/wire"
)

// TestShardForKeyIsWire checks a stream routes keys exactly as
// wire.ShardForKey does, the function clients use (its own tests pin the
// mapping), and refuses a shard it does not have.
func TestShardForKeyIsWire(t *testing.T) {
	_, st := newTestStream(t, Config{}, 12, "")
	for i := range 1000 {
		key := []byte("key-" + strconv.Itoa(i))
		if got, want := st.ShardForKey(key), wire.ShardForKey(key, 12); got != want {
			t.Fatalf("ShardForKey(%q) = %d, want %d", key, got, want)
		}
	}
	if got := st.ShardForKey(nil); got != 0 {
		t.Errorf("nil key -> shard %d, want 0", got)
	}
	if _, err := st.Shard(12); err == nil {
		t.Error("shard 12 of 12 accepted")
	}
}

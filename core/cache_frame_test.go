package core

import (
	"errors"
	"testing"

	"github.com/felixmq/felix/wire"
)

// TestCacheChangeFrameErrorSurfaces checks that a change that cannot be
// encoded reports why, every time, instead of handing out a nil frame.
func TestCacheChangeFrameErrorSurfaces(t *testing.T) {
	ch := &CacheChange{Offset: 7, Op: wire.CacheChangeOp("bogus"), Key: "k"}
	for i := 0; i < 2; i++ {
		b, err := ch.EncodedFrame()
		var we *wire.Error
		if b != nil || !errors.As(err, &we) || we.Code != wire.CodeInternal {
			t.Fatalf("call %d: frame %q err %v", i, b, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Frame returned for a change that cannot be encoded")
		}
	}()
	ch.Frame()
}

func TestCacheChangeFrameEncodesEveryOp(t *testing.T) {
	for _, op := range []wire.CacheChangeOp{wire.CacheOpPut, wire.CacheOpDelete, wire.CacheOpExpire} {
		ch := &CacheChange{Offset: 3, Op: op, Key: "k"}
		b, err := ch.EncodedFrame()
		if err != nil || len(b) <= wire.HeaderLen {
			t.Fatalf("%s: frame %q err %v", op, b, err)
		}
		m, err := wire.ParseMessage(b[wire.HeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		if cc, ok := m.(*wire.CacheChange); !ok || cc.Op != op || cc.Offset != 3 {
			t.Fatalf("%s: decoded %#v", op, m)
		}
	}
}

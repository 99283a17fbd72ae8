package broker

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/roles/broker/sched"
)

func TestLaneTableBoundsAndOrder(t *testing.T) {
	lt := newLaneTable(2)
	k := sched.LaneKey{Stream: core.StreamKey{Tenant: "t", Namespace: "n", Stream: "s"}}
	a, ok1 := lt.admit(context.Background(), k, false)
	b, ok2 := lt.admit(context.Background(), k, false)
	if !ok1 || !ok2 {
		t.Fatal("a lane with room refused")
	}
	if _, ok := lt.admit(context.Background(), k, false); ok {
		t.Fatal("a full lane admitted a third publish")
	}
	other := sched.LaneKey{Stream: k.Stream, Shard: 1}
	if l, ok := lt.admit(context.Background(), other, false); !ok {
		t.Fatal("another shard's lane was refused")
	} else {
		lt.release(l)
	}
	prevA, doneA := lt.link(a)
	prevB, doneB := lt.link(b)
	if !isClosed(prevA) || prevB != doneA {
		t.Fatal("the second publish does not wait for the first")
	}
	close(doneA)
	close(doneB)
	lt.release(a)
	lt.release(b)
	if len(lt.m) != 0 {
		t.Fatalf("%d lanes left after every publish finished", len(lt.m))
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestStreamWriterOwedAnswers(t *testing.T) {
	var out lockedBuffer
	owed := newServerMetrics().outAckDepth
	sw := newStreamWriter(&out, 2, owed, func(error) {})
	ctx := context.Background()
	if err := sw.reserveOwed(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sw.reserveOwed(ctx); err != nil {
		t.Fatal(err)
	}
	if owed.Get() != 2 {
		t.Fatalf("out ack depth %v with two answers owed", owed.Get())
	}
	full, cancel := context.WithCancel(ctx)
	cancel()
	if err := sw.reserveOwed(full); err == nil {
		t.Fatal("a third answer slot was reserved")
	}
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	if err := sw.waitOwed(short); err == nil {
		t.Fatal("waitOwed returned while two answers were owed")
	}
	sw.sendOwed([]byte("a"))
	sw.cancelOwed()
	if err := sw.send(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := sw.waitOwed(ctx); err != nil {
		t.Fatal(err)
	}
	sw.stop()
	if got := out.b.String(); len(got) != 2 || !bytes.ContainsRune([]byte(got), 'a') || !bytes.ContainsRune([]byte(got), 'b') {
		t.Fatalf("wrote %q", got)
	}
	if owed.Get() != 0 {
		t.Fatalf("out ack depth %v", owed.Get())
	}
}

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
	ta, err := sw.reserveOwed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sw.reserveOwed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if owed.Get() != 2 {
		t.Fatalf("out ack depth %v with two answers owed", owed.Get())
	}
	full, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sw.reserveOwed(full); err == nil {
		t.Fatal("a third answer slot was reserved")
	}
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	if err := sw.waitOwed(short); err == nil {
		t.Fatal("waitOwed returned while two answers were owed")
	}
	sw.sendOwed(ta, []byte("a"))
	sw.cancelOwed(tb)
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

// On a pipelining stream the writer writes answers in the order their
// slots were taken, whatever order they come in, a slot given back
// unused included, and frees a slot only once its answer is written.
func TestStreamWriterOrderedAnswers(t *testing.T) {
	var out lockedBuffer
	owed := newServerMetrics().outAckDepth
	sw := newStreamWriter(&out, 1024, owed, func(error) {})
	sw.pipeline(3)
	ctx := context.Background()
	var ts []owedTicket
	for range 3 {
		tk, err := sw.reserveOwed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tk)
	}
	full, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sw.reserveOwed(full); err == nil {
		t.Fatal("a fourth slot was taken in a window of three")
	}
	sw.sendOwed(ts[2], []byte("c"))
	sw.cancelOwed(ts[1])
	waitWritten := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			out.mu.Lock()
			got := out.b.String()
			out.mu.Unlock()
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("wrote %q, want %q", got, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := sw.reserveOwed(full); err == nil {
		t.Fatal("a slot was freed before its answer was written")
	}
	sw.sendOwed(ts[0], []byte("a"))
	waitWritten("ac")
	if err := sw.waitOwed(ctx); err != nil {
		t.Fatal(err)
	}
	t4, err := sw.reserveOwed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sw.sendOwed(t4, []byte("d"))
	waitWritten("acd")
	sw.stop()
	if owed.Get() != 0 {
		t.Fatalf("out ack depth %v", owed.Get())
	}
}

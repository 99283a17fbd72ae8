package felix

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// connectClusterFast connects to the seeds with short resume backoff.
func connectClusterFast(t *testing.T, cfg Config, seeds ...string) *ClusterClient {
	t.Helper()
	cc, err := ConnectCluster(context.Background(), seeds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cc.resumeBase, cc.resumeMax = time.Millisecond, 5*time.Millisecond
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// expectOffsets reads len(want) events and checks their offsets.
func expectOffsets(t *testing.T, sub eventSource, want ...uint64) {
	t.Helper()
	for _, w := range want {
		ev := next(t, sub)
		if !ev.HasOffset || ev.Offset != w || string(ev.Payload) != fmt.Sprintf("m%d", w) {
			t.Fatalf("got %+v (payload %q), want offset %d", ev, ev.Payload, w)
		}
	}
}

// sendRange sends offsets [from, to) as one batch.
func sendRange(t *testing.T, fs *fakeSub, from, to uint64) {
	t.Helper()
	var payloads [][]byte
	for o := from; o < to; o++ {
		payloads = append(payloads, fmt.Appendf(nil, "m%d", o))
	}
	fs.send(t, from, payloads...)
}

func startOf(t *testing.T, fs *fakeSub) uint64 {
	t.Helper()
	m := fs.msg
	if m.Start == nil || m.Start.Kind != wire.StartOffset {
		t.Fatalf("resubscribe without an offset start: %+v", m)
	}
	return m.Start.Offset
}

func TestClusterSubscriptionResumesAfterLag(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(0, 100)})
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	before := subscriptionResumes.Get()
	sub := clusterSubscribe(t, cc, &SubscribeOptions{Start: AtOffset(5), Shard: 1})
	if off, ok := sub.StartOffset(); !ok || off != 5 {
		t.Fatalf("start offset %d %v", off, ok)
	}
	fs := fb.nextSubscription()
	sendRange(t, fs, 5, 9)
	// The broker reports a drop at 10; offset 9 was lost on the way out
	// unreported, so the resume must start after the last event seen.
	fs.lag(t, 10)
	expectOffsets(t, sub, 5, 6, 7, 8)

	nextC := make(chan Event, 1)
	go func() { nextC <- next(t, sub) }()
	fs2 := fb.nextSubscription()
	if got := startOf(t, fs2); got != 9 || *fs2.msg.Shard != 1 {
		t.Fatalf("resumed at %d shard %d, want 9 shard 1", got, *fs2.msg.Shard)
	}
	sendRange(t, fs2, 7, 12) // 7 and 8 repeat what was delivered
	if ev := <-nextC; ev.Offset != 9 {
		t.Fatalf("first event after the resume: %+v", ev)
	}
	expectOffsets(t, sub, 10, 11)
	if sub.Resumes() != 1 || subscriptionResumes.Get()-before != 1 {
		t.Fatalf("resumes %d, metric +%d", sub.Resumes(), subscriptionResumes.Get()-before)
	}
	if sub.ID() != fs2.id {
		t.Fatalf("id %d, want the new subscription's %d", sub.ID(), fs2.id)
	}
}

func TestClusterSubscriptionResumesOnAnotherBroker(t *testing.T) {
	f1 := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(0, 100)})
	f2 := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(0, 100)})
	cc := connectClusterFast(t, f1.config(), f1.Addr(), f2.Addr())
	sub := clusterSubscribe(t, cc, nil)
	fs := f1.nextSubscription()
	sendRange(t, fs, 20, 24)
	expectOffsets(t, sub, 20, 21, 22, 23)
	f1.Kill()

	nextC := make(chan Event, 1)
	go func() { nextC <- next(t, sub) }()
	fs2 := f2.nextSubscription()
	if got := startOf(t, fs2); got != 24 {
		t.Fatalf("resumed at %d, want 24", got)
	}
	sendRange(t, fs2, 22, 27)
	if ev := <-nextC; ev.Offset != 24 {
		t.Fatalf("first event after the resume: %+v", ev)
	}
	expectOffsets(t, sub, 25, 26)
	if sub.Resumes() != 1 || cc.Addr() != f2.Addr() {
		t.Fatalf("resumes %d on %s", sub.Resumes(), cc.Addr())
	}
}

func TestClusterSubscriptionResumesAtStartBeforeAnyEvent(t *testing.T) {
	f1 := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(0, 100)})
	f2 := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(0, 100)})
	cc := connectClusterFast(t, f1.config(), f1.Addr(), f2.Addr())
	sub := clusterSubscribe(t, cc, &SubscribeOptions{Start: Earliest()})
	f1.nextSubscription()
	f1.Kill()
	nextC := make(chan Event, 1)
	go func() { nextC <- next(t, sub) }()
	fs2 := f2.nextSubscription()
	if got := startOf(t, fs2); got != 0 {
		t.Fatalf("resumed at %d, want the start offset 0", got)
	}
	sendRange(t, fs2, 0, 1)
	if ev := <-nextC; ev.Offset != 0 {
		t.Fatalf("got %+v", ev)
	}
}

func TestClusterSubscriptionWithoutOffsetsIsLost(t *testing.T) {
	f1 := newFakeBroker(t, fakeOpts{flags: 0}) // JSON, no offsets: an in-memory stream
	f2 := newFakeBroker(t, fakeOpts{flags: 0})
	cc := connectClusterFast(t, f1.config(), f1.Addr(), f2.Addr())
	sub := clusterSubscribe(t, cc, nil)
	fs := f1.nextSubscription()
	if err := writeMsg(fs.es, &wire.EventBatch{Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, sub); ev.HasOffset {
		t.Fatalf("got %+v", ev)
	}
	f1.Kill()
	if err := nextErr(t, sub); !errors.Is(err, ErrSubscriptionLost) {
		t.Fatalf("got %v", err)
	}
	if sub.Resumes() != 0 {
		t.Fatal("resumed a stream without offsets")
	}
}

func TestClusterSubscriptionReturnsCursorErrorOnResume(t *testing.T) {
	// The log kept only offsets 50 and up by the time of the resume.
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(50, 100)})
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	sub := clusterSubscribe(t, cc, nil)
	fs := fb.nextSubscription()
	sendRange(t, fs, 10, 12)
	fs.lag(t, 12)
	expectOffsets(t, sub, 10, 11)
	err := nextErr(t, sub)
	var ce *SubscribeCursorError
	if !errors.As(err, &ce) || ce.Requested != 12 || ce.Available != 50 {
		t.Fatalf("got %T %v", err, err)
	}
}

func TestClusterSubscriptionGivesUpAfterBoundedAttempts(t *testing.T) {
	refuse := func(*wire.Subscribe) wire.Message {
		return wire.NewError(wire.CodeShardUnavailable, "moving").ErrorMessage(true)
	}
	var answered atomic.Bool
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: func(m *wire.Subscribe) wire.Message {
		if answered.CompareAndSwap(false, true) { // the first subscribe works
			return &wire.Subscribed{}
		}
		return refuse(m)
	}})
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	sub := clusterSubscribe(t, cc, nil)
	fs := fb.nextSubscription()
	sendRange(t, fs, 1, 2)
	fs.lag(t, 2)
	expectOffsets(t, sub, 1)
	err := nextErr(t, sub)
	be := asBroker(t, err)
	if be.Code != wire.CodeShardUnavailable || sub.Resumes() != 0 {
		t.Fatalf("got %v after %d resumes", err, sub.Resumes())
	}
}

func TestClusterSubscriptionClose(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	sub, err := cc.Subscribe(context.Background(), "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	fb.nextSubscription()
	errC := make(chan error, 1)
	go func() {
		_, err := sub.Next(context.Background())
		errC <- err
	}()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errC; !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v", err)
	}
	if _, err := sub.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestClusterClientReadFailsOver(t *testing.T) {
	f1 := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: durableFeatures})
	f2 := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: durableFeatures})
	f2.setLog("ns", "s", testLog())
	cc := connectClusterFast(t, f1.config(), f1.Addr(), f2.Addr())
	if !cc.SupportsRead() || !cc.SupportsOffsetForTime() {
		t.Fatal("features not seen")
	}
	f1.Kill()
	page, err := cc.Read(context.Background(), "ns", "s", 0, 10, nil, 2)
	if err != nil || len(page.Records) != 2 || page.NextOffset != 12 {
		t.Fatalf("read across the failover: %+v %v", page, err)
	}
	off, ok, err := cc.OffsetForTime(context.Background(), "ns", "s", 0, time.UnixMicro(16_000_000))
	if err != nil || !ok || off != 16 {
		t.Fatalf("offset for time: %d %v %v", off, ok, err)
	}
	res, err := cc.PublishAcked(context.Background(), "ns", "s", []byte("x"), AckPerMessage)
	if err != nil || !res.HasOffset {
		t.Fatalf("publish: %+v %v", res, err)
	}
}

func TestClusterSubscriptionNextIsCancelSafeAcrossResume(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(0, 100)})
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	sub := clusterSubscribe(t, cc, nil)
	fs := fb.nextSubscription()
	sendRange(t, fs, 0, 2)
	fs.lag(t, 2)
	expectOffsets(t, sub, 0, 1)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Next: %v", err)
	}
	nextC := make(chan Event, 1)
	go func() { nextC <- next(t, sub) }()
	fs2 := fb.nextSubscription()
	if got := startOf(t, fs2); got != 2 {
		t.Fatalf("resumed at %d", got)
	}
	sendRange(t, fs2, 2, 3)
	if ev := <-nextC; ev.Offset != 2 {
		t.Fatalf("got %+v", ev)
	}
}

// clusterSubscribe subscribes cc to ns/s (from o when given), closing the
// subscription at the end of the test.
func clusterSubscribe(t *testing.T, cc *ClusterClient, o *SubscribeOptions) *ClusterSubscription {
	t.Helper()
	var sub *ClusterSubscription
	var err error
	if o == nil {
		sub, err = cc.Subscribe(context.Background(), "ns", "s")
	} else {
		sub, err = cc.SubscribeFrom(context.Background(), "ns", "s", *o)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

// TestClusterSubscriptionResumeFollowsRetryClass refuses the first
// resubscribe with a code and an explicit retry class and checks the
// subscription resumes exactly when the class says nothing was applied,
// whatever the code: a code's usual class, or a code this client does
// not know, does not decide it.
func TestClusterSubscriptionResumeFollowsRetryClass(t *testing.T) {
	for _, tc := range []struct {
		code   wire.Code
		retry  wire.RetryClass
		resume bool
	}{
		{wire.CodeNotFound, wire.RetryRetryAfter, true},
		{wire.CodeShardUnavailable, wire.RetryRetry, true},
		{wire.CodeNotLeader, wire.RetryRedirect, true},
		{wire.CodeInvalidRequest, wire.RetryRetry, true}, // usually fatal
		{"some_new_code", wire.RetryRetryAfter, true},
		{wire.CodeNotFound, wire.RetryFatal, false}, // usually retry_after
		{wire.CodeShardUnavailable, wire.RetryOutcomeUnknown, false},
		{wire.CodeInternal, wire.RetryOutcomeUnknown, false},
		{wire.CodeForbidden, wire.RetryFatal, false},
		{"some_new_code", wire.RetryFatal, false},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.code, tc.retry), func(t *testing.T) {
			var subscribes atomic.Int32
			fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: func(*wire.Subscribe) wire.Message {
				if subscribes.Add(1) == 2 { // the first resubscribe is refused
					return (&wire.Error{Code: tc.code, Retry: tc.retry, Message: "refused"}).ErrorMessage(true)
				}
				return &wire.Subscribed{}
			}})
			cc := connectClusterFast(t, fb.config(), fb.Addr())
			sub := clusterSubscribe(t, cc, nil)
			fs := fb.nextSubscription()
			sendRange(t, fs, 1, 2)
			fs.lag(t, 2)
			expectOffsets(t, sub, 1)
			if !tc.resume {
				be := asBroker(t, nextErr(t, sub))
				if be.Code != tc.code || be.Retry != tc.retry || sub.Resumes() != 0 || subscribes.Load() != 2 {
					t.Fatalf("got %v after %d resumes and %d subscribes, want the refusal after one attempt", be, sub.Resumes(), subscribes.Load())
				}
				return
			}
			type result struct {
				ev  Event
				err error
			}
			nextC := make(chan result, 1)
			go func() { // Next resumes; the broker side is driven below
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				ev, err := sub.Next(ctx)
				nextC <- result{ev, err}
			}()
			fs = fb.nextSubscription()
			if got := startOf(t, fs); got != 2 {
				t.Fatalf("resumed at %d, want 2", got)
			}
			sendRange(t, fs, 2, 3)
			if r := <-nextC; r.err != nil || r.ev.Offset != 2 {
				t.Fatalf("after the resume: %+v %v", r.ev, r.err)
			}
			if sub.Resumes() != 1 || subscribes.Load() != 3 {
				t.Fatalf("%d resumes after %d subscribes, want 1 after 3", sub.Resumes(), subscribes.Load())
			}
		})
	}
}

// A resume waiting out a long backoff tries again as soon as the client
// learns that a shard moved (here as a publish would, from a redirect).
func TestAResumeWaitingOutItsBackoffTriesAgainWhenAShardMoves(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{subscribed: durableAnswer(0, 100)})
	cl.place(KindStream, "ns", "s", 0, 1)
	cc := connectClusterTest(t, cl, 0)
	cc.resumeBase, cc.resumeMax = time.Minute, time.Minute
	sub := clusterSubscribe(t, cc, &SubscribeOptions{Start: AtOffset(0), Shard: 1})
	fs := cl.node(1).nextSubscription()
	sendRange(t, fs, 0, 2)
	expectOffsets(t, sub, 0, 1)

	// Shard 1's owner dies: the first resume finds nobody serving it
	// (the entry still names the dead broker) and backs off a minute.
	cl.node(1).Kill()
	got := make(chan Event, 1)
	go func() {
		ev, _ := sub.Next(context.Background())
		got <- ev
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case ev := <-got:
		t.Fatalf("resumed before the shard moved: %+v", ev)
	default:
	}
	cl.place(KindStream, "ns", "s", 0, 2)
	cc.owners.learn(ownerKey{kind: KindStream, namespace: "ns", name: "s"}, 1, cl.node(2).Addr())
	fs2 := cl.node(2).nextSubscription()
	if got := startOf(t, fs2); got != 2 {
		t.Fatalf("resubscribed at %d, want 2", got)
	}
	sendRange(t, fs2, 2, 3)
	select {
	case ev := <-got:
		if ev.Offset != 2 {
			t.Fatalf("first event after the move: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after the move")
	}
}

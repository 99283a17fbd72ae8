package catalogsync

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// logRecorder is a slog handler that keeps the messages it was given.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }
func (l *logRecorder) count(msg string) (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

func TestRunRepeatsAndLogsOncePerStreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, rec := newFakeSource(), &recorder{}
		src.setFail("jwks", errors.New("keys unavailable"))
		logs := &logRecorder{}
		s := NewSyncer(src, rec, time.Second, slog.New(logs))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()

		time.Sleep(3500 * time.Millisecond) // passes at 0s, 1s, 2s, 3s
		synctest.Wait()
		if n := countCalls(src, "jwks"); n != 4 {
			t.Fatalf("%d passes after 3.5s, want 4", n)
		}
		if n := logs.count("catalog sync failed; retrying"); n != 1 {
			t.Fatalf("failure logged %d times during one streak", n)
		}
		if s.Synced() {
			t.Fatal("Synced while the JWKS fails")
		}

		src.setFail("jwks", nil)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !s.Synced() || logs.count("catalog sync recovered") != 1 || logs.count("catalog synced") != 1 {
			t.Fatalf("after recovery: synced %v, logs %q", s.Synced(), logs.msgs)
		}
		cancel()
		<-done
	})
}

func countCalls(f *fakeSource, key string) (n int) {
	for _, c := range f.callLog() {
		if c == key {
			n++
		}
	}
	return n
}

package controlplane

import (
	"context"
	"errors"
	"testing"
)

// stuckStore is a Store whose meta reads hang until their context ends,
// like a Raft store that lost its quorum; deadline records whether the
// read's context had one.
type stuckStore struct {
	Store
	deadline bool
}

func (s *stuckStore) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	_, s.deadline = ctx.Deadline()
	<-ctx.Done()
	return nil, false, ctx.Err()
}

// TestNewContextEndsWithTheCaller checks that NewContext's store reads run
// under the caller's context, bounded even when the caller set no
// deadline, so that a stuck store fails the start with the context's error
// instead of hanging it.
func TestNewContextEndsWithTheCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	store := &stuckStore{}
	done := make(chan error, 1)
	go func() {
		_, err := NewContext(ctx, Config{Logger: quietLogger()}, store)
		done <- err
	}()
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the caller's cancellation", err)
	}
	if !store.deadline {
		t.Fatal("the store read ran without a deadline")
	}
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// Resume bounds, the SDK's ClusterClient's: a resume that keeps failing
// backs off from resumeBackoffBase, doubling up to resumeBackoffMax, and
// gives up after maxResumeAttempts in a row without anything printed.
// Ten attempts span about ten seconds, enough for a broker to restart.
const (
	maxResumeAttempts = 10
	resumeBackoffBase = 50 * time.Millisecond
	resumeBackoffMax  = 2 * time.Second
)

// resumer connects again and resubscribes every shard where its output
// stands, after a durable subscription was lost with its connection. It
// owns the connections it dialed (the command's first one is the
// caller's) and closes them.
type resumer struct {
	failures int // attempts since something was last printed
	dialed   brokerClient
}

// resume retries, with back-off, until a new connection holds a
// subscription for every shard, each starting where its output stands.
// cause is why the last session ended.
func (res *resumer) resume(ctx context.Context, r *subRun, cause error) (brokerClient, []eventSource, error) {
	for {
		if res.failures >= maxResumeAttempts {
			return nil, nil, fmt.Errorf("could not resume %s after %d attempts: %w", r.resumePoints(), res.failures, cause)
		}
		if err := res.backoff(ctx); err != nil {
			return nil, nil, err
		}
		res.failures++
		res.close()
		bc, err := r.redial(ctx)
		if err != nil {
			cause = err
			continue
		}
		res.dialed = bc
		subs, err := r.subscribeAt(ctx, bc)
		if err == nil {
			return bc, subs, nil
		}
		if !retryableResume(err) {
			return nil, nil, err
		}
		cause = err
	}
}

// subscribeAt subscribes every shard where its output stands.
func (r *subRun) subscribeAt(ctx context.Context, bc brokerClient) ([]eventSource, error) {
	subs := make([]eventSource, 0, len(r.shards))
	for _, shard := range r.shards {
		sub, err := bc.SubscribeFrom(ctx, r.ns, r.stream, felix.SubscribeOptions{Start: felix.AtOffset(r.cursors[shard].from), Shard: shard})
		if err != nil {
			closeAll(subs)
			return nil, err
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

// backoff waits before every attempt but the first of a run.
func (res *resumer) backoff(ctx context.Context) error {
	if res.failures == 0 {
		return ctx.Err()
	}
	d := min(resumeBackoffBase<<min(res.failures-1, 16), resumeBackoffMax)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close closes the connection the resumer dialed last, if any.
func (res *resumer) close() {
	if res.dialed != nil {
		_ = res.dialed.Close()
		res.dialed = nil
	}
}

// retryableResume reports whether a failed resubscribe may work later,
// as the SDK's ClusterClient judges it: the connection was lost, or the
// refusal's retry class says nothing was applied and a retry may work (a
// broker still coming up, or learning of the stream).
func retryableResume(err error) bool {
	if errors.Is(err, felix.ErrConnectionLost) || errors.Is(err, felix.ErrSubscriptionLost) {
		return true
	}
	var be *felix.BrokerError
	return errors.As(err, &be) && be.Retry.Retryable()
}

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	felix "github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// watchSpec says how a recorded watch starts: fresh, with current values
// (retained), or, once it has a session, by resuming where the last one
// ended.
type watchSpec struct {
	name     string
	filter   felix.CacheWatchFilter
	retained bool
	// from, when set, is where the first session resumes from.
	from *uint64
}

// openSession starts one cache_watch and its record: from a resume
// offset when from is set.
func openSession(ctx context.Context, c *felix.Client, cache string, spec watchSpec, from *uint64) (*felix.CacheWatch, *watchSession, error) {
	var opts []felix.WatchOption
	switch {
	case from != nil:
		opts = append(opts, felix.WatchFrom(*from))
	case spec.retained:
		opts = append(opts, felix.WatchRetained())
	}
	w, err := c.WatchCache(ctx, "default", cache, spec.filter, opts...)
	if err != nil {
		return nil, nil, err
	}
	s := &watchSession{Filter: spec.filter, From: from, Retained: from == nil && spec.retained,
		Start: w.ResumeOffset(), Resnapshot: w.Resnapshot()}
	s.End = s.Start
	return w, s, nil
}

// drainSession reads w into s (under mu, so others may look at it
// meanwhile) until the watch ends or ctx does, and returns why.
func drainSession(ctx context.Context, mu *sync.Mutex, w *felix.CacheWatch, s *watchSession) error {
	for {
		it, err := w.Next(ctx)
		if err != nil {
			return err
		}
		mu.Lock()
		s.Items = append(s.Items, it)
		s.End = w.ResumeOffset()
		mu.Unlock()
	}
}

// followWatch keeps rec's watch going on c until ctx ends or the broker
// goes away: it resumes from the last session's end (a fresh record
// starts as spec says), and resumes again after a lag. Sessions are
// appended to rec, and items to them, under mu.
func followWatch(ctx context.Context, t *testing.T, mu *sync.Mutex, c *felix.Client, cache string, spec watchSpec, rec *watchLog) {
	for ctx.Err() == nil {
		mu.Lock()
		from := spec.from
		if n := len(rec.Sessions); n > 0 {
			end := rec.Sessions[n-1].End
			from = &end
		}
		mu.Unlock()
		w, s, err := openSession(ctx, c, cache, spec, from)
		if err != nil {
			// A resume the broker refuses as a bad request (in_future:
			// offsets went back across a restart) is a broken guarantee;
			// anything else here is the broker going away.
			var be *felix.BrokerError
			if errors.As(err, &be) && be.Code == wire.CodeInvalidRequest {
				t.Errorf("%s: watch from %v refused: %v", spec.name, from, err)
			}
			return
		}
		mu.Lock()
		rec.Sessions = append(rec.Sessions, s)
		mu.Unlock()
		err = drainSession(ctx, mu, w, s)
		w.Close()
		var lagged *felix.CacheWatchLagged
		if !errors.As(err, &lagged) {
			return
		}
	}
}

// keyWriter writes the keys it owns, w/<id>/p<n> (puts and deletes) and
// w/<id>/t<n> (puts with a short TTL, which expire), with a value unique
// to each write, and records each in the history: acknowledged, or in
// doubt when its call failed. It stops at the first failure, which is
// the broker being killed.
type keyWriter struct {
	id   int
	seq  int
	live map[string]bool // plain keys whose last write was an acknowledged put
}

func (kw *keyWriter) run(ctx context.Context, c *felix.Client, cache string, hist *writeHistory) int {
	if kw.live == nil {
		kw.live = map[string]bool{}
	}
	acked := 0
	for ctx.Err() == nil {
		kw.seq++
		var key, value string
		var err error
		op := "put"
		if kw.seq%4 == 3 {
			key = fmt.Sprintf("w/%d/t%d", kw.id, kw.seq%3)
			value = fmt.Sprintf("%s#%d", key, kw.seq)
			err = c.CachePut(ctx, "default", cache, key, []byte(value), time.Duration(150+kw.seq%5*100)*time.Millisecond)
		} else {
			key = fmt.Sprintf("w/%d/p%d", kw.id, kw.seq%5)
			if kw.live[key] && kw.seq%3 == 0 {
				op = "delete"
				_, _, err = c.CacheDelete(ctx, "default", cache, key)
			} else {
				value = fmt.Sprintf("%s#%d", key, kw.seq)
				err = c.CachePut(ctx, "default", cache, key, []byte(value), 0)
			}
			kw.live[key] = err == nil && op == "put"
		}
		hist.add(key, writtenOp{Op: op, Value: value, Acked: err == nil})
		if err != nil {
			return acked
		}
		acked++
	}
	return acked
}

// finalPut puts to one of the writer's plain keys, after run stopped,
// and records it: a write every watch must end with.
func (kw *keyWriter) finalPut(ctx context.Context, c *felix.Client, cache string, hist *writeHistory) (key, value string, err error) {
	kw.seq++
	key = fmt.Sprintf("w/%d/p%d", kw.id, kw.seq%5)
	value = fmt.Sprintf("%s#%d", key, kw.seq)
	err = c.CachePut(ctx, "default", cache, key, []byte(value), 0)
	hist.add(key, writtenOp{Op: "put", Value: value, Acked: err == nil})
	if kw.live != nil {
		kw.live[key] = err == nil
	}
	return key, value, err
}

// fillCache puts to keys outside every watched prefix, as fast as
// workers pipelined calls allow, until ctx ends or a call fails: it
// drives the log's compaction (which waits for tens of thousands of
// records) without reaching the watches. It returns how many it wrote.
func fillCache(ctx context.Context, c *felix.Client, cache string, workers, keys int) int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	total := 0
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for ; ctx.Err() == nil; n++ {
				key := fmt.Sprintf("f/%d/%d", g, n%keys)
				if c.CachePut(ctx, "default", cache, key, []byte("x"), 0) != nil {
					break
				}
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	return total
}

// reportWatchErrors fails t with each broken guarantee.
func reportWatchErrors(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		t.Error(err)
	}
}

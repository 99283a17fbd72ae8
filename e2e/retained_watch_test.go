package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// watchRecord is what one watch delivered: its current values, its state
// item and the changes after it.
type watchRecord struct {
	filter  felix.CacheWatchFilter
	values  []felix.CacheWatchItem
	state   felix.CacheWatchItem
	changes []felix.CacheWatchItem
	err     error
}

func (f watchMatch) match(key string) bool {
	if f.Prefix {
		return strings.HasPrefix(key, f.Key)
	}
	return key == f.Key
}

type watchMatch felix.CacheWatchFilter

// readWatch reads w until a change puts last (a key that filter matches)
// to "end".
func readWatch(ctx context.Context, w itemSource, r *watchRecord, last string) {
	for {
		it, err := w.Next(ctx)
		if err != nil {
			r.err = err
			return
		}
		switch {
		case it.Retained:
			r.values = append(r.values, it)
		case it.StateComplete:
			r.state = it
		default:
			r.changes = append(r.changes, it)
			if it.Key == last && string(it.Value) == "end" {
				return
			}
		}
	}
}

// TestRetainedWatchesOpenedDuringWritesStartComplete runs eight writers,
// each putting, deleting and putting with a short time to live its own two
// keys one acknowledged write at a time, while 64 retained watches (the
// whole prefix, one writer's keys, one key) are opened through the real
// broker. Every watch's values must be exactly the keys that held a value
// at its state's offset, and its changes exactly the writes after it, as
// a watch opened before the first write saw them.
func TestRetainedWatchesOpenedDuringWritesStartComplete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n, admin := watchNode(t, ctx, t.TempDir(), "presence")
	for i := range 2000 { // make each retained read of the cache take a while
		if err := admin.CachePut(ctx, "default", "presence", fmt.Sprint("filler-", i), []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := admin.WatchCache(ctx, "default", "presence", felix.WatchPrefix("w/"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	refRec := &watchRecord{filter: felix.WatchPrefix("w/")}
	refDone := make(chan struct{})
	go func() { defer close(refDone); readWatch(ctx, ref, refRec, "w/5-1") }()

	const writers, writes = 8, 200
	var wg sync.WaitGroup
	for g := range writers {
		c := n.connect(ctx, n.adminToken())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				k := fmt.Sprintf("w/%d-%d", g, i%2)
				var err error
				switch i % 7 {
				case 3:
					_, _, err = c.CacheDelete(ctx, "default", "presence", k)
				case 5:
					err = c.CachePut(ctx, "default", "presence", k, []byte(fmt.Sprint(i)), 20*time.Millisecond)
				default:
					err = c.CachePut(ctx, "default", "presence", k, []byte(fmt.Sprint(i)), 0)
				}
				if err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
			}
		}()
	}
	filters := []struct {
		f    felix.CacheWatchFilter
		last string
	}{{felix.WatchPrefix("w/"), "w/5-1"}, {felix.WatchPrefix("w/3-"), "w/3-end"}, {felix.WatchKey("w/5-1"), "w/5-1"}}
	var readers sync.WaitGroup
	var records []*watchRecord
	watcher := n.connect(ctx, n.adminToken())
	for i := range 64 {
		f := filters[i%len(filters)]
		w, err := watcher.WatchCache(ctx, "default", "presence", f.f, felix.WatchRetained())
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		r := &watchRecord{filter: f.f}
		records = append(records, r)
		readers.Add(1)
		go func() { defer readers.Done(); readWatch(ctx, w, r, f.last) }()
		time.Sleep(time.Millisecond) // spread the starts over the writes
	}
	wg.Wait()
	for _, k := range []string{"w/3-end", "w/5-1"} {
		if err := admin.CachePut(ctx, "default", "presence", k, []byte("end"), 0); err != nil {
			t.Fatal(err)
		}
	}
	readers.Wait()
	<-refDone
	if refRec.err != nil {
		t.Fatalf("reference watch: %v", refRec.err)
	}
	log := refRec.changes
	for i := 1; i < len(log); i++ {
		if log[i].Offset != log[i-1].Offset+1 {
			t.Fatalf("the reference watch has a gap: offset %d after %d", log[i].Offset, log[i-1].Offset)
		}
	}
	for i, r := range records {
		checkRetained(t, fmt.Sprintf("watch %d %+v", i, r.filter), r, log)
	}
}

// checkRetained checks one retained watch against the whole log.
func checkRetained(t *testing.T, name string, r *watchRecord, log []felix.CacheWatchItem) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v", name, r.err)
	}
	if !r.state.StateComplete || r.state.Count != uint64(len(r.values)) {
		t.Fatalf("%s: state %+v after %d values", name, r.state, len(r.values))
	}
	m := watchMatch(r.filter)
	want := map[string]string{} // the matching keys' values at the state's offset
	var after []felix.CacheWatchItem
	for _, ch := range log {
		switch {
		case !m.match(ch.Key):
		case ch.Offset >= r.state.Offset:
			after = append(after, ch)
		case ch.Op == "put":
			want[ch.Key] = fmt.Sprintf("%s@%d", ch.Value, ch.Offset)
		default:
			delete(want, ch.Key)
		}
	}
	got := map[string]string{}
	for _, v := range r.values {
		got[v.Key] = fmt.Sprintf("%s@%d", v.Value, v.Offset)
	}
	if !maps.Equal(got, want) || len(got) != len(r.values) {
		t.Fatalf("%s: values at offset %d are\n%v\nthe log says\n%v", name, r.state.Offset, got, want)
	}
	if len(r.changes) != len(after) {
		t.Fatalf("%s: %d changes after the state, the log has %d", name, len(r.changes), len(after))
	}
	for i, ch := range r.changes {
		w := after[i]
		if ch.Offset != w.Offset || ch.Op != w.Op || ch.Key != w.Key || string(ch.Value) != string(w.Value) {
			t.Fatalf("%s: change %d is %+v, the log has %+v", name, i, ch, w)
		}
	}
}

package e2e

import (
	"strings"
	"testing"

	felix "github.com/felixmq/felix/sdk/felix"
)

// TestWatchValidatorCatchesBrokenGuarantees feeds the validator a correct
// watch and then copies of it with one guarantee broken each, and checks
// that each is caught by name (and the correct one is not), so the long
// run's silence means something.
func TestWatchValidatorCatchesBrokenGuarantees(t *testing.T) {
	put := func(off uint64, v string) felix.CacheWatchItem {
		return felix.CacheWatchItem{Offset: off, Op: "put", Key: "w/0/p0", Value: []byte(v)}
	}
	del := func(off uint64) felix.CacheWatchItem {
		return felix.CacheWatchItem{Offset: off, Op: "delete", Key: "w/0/p0"}
	}
	writes := func() *writeHistory {
		h := newWriteHistory()
		h.add("w/0/p0", writtenOp{Op: "put", Value: "a1", Acked: true})
		h.add("w/0/p0", writtenOp{Op: "put", Value: "a2", Acked: true})
		h.add("w/0/p0", writtenOp{Op: "delete", Acked: true})
		h.add("w/0/p0", writtenOp{Op: "put", Value: "a3", Acked: false}) // lost with the broker
		return h
	}
	from := func(o uint64) *uint64 { return &o }
	filter := felix.WatchPrefix("w/")
	reference := func(items ...felix.CacheWatchItem) *watchLog {
		return &watchLog{Name: "all", Sessions: []*watchSession{{Filter: filter, Start: 10, End: 13, Items: items}}}
	}
	good := reference(put(10, "a1"), put(11, "a2"), del(12))
	cases := []struct {
		name  string
		logs  []*watchLog
		wants string // "" for none
	}{
		{"correct", []*watchLog{good}, ""},
		{"out of order", []*watchLog{reference(put(11, "a2"), put(10, "a1"), del(12))}, "broke ordered"},
		{"a gap", []*watchLog{good, {Name: "gap", Sessions: []*watchSession{{Filter: filter, Start: 10, End: 13, Items: []felix.CacheWatchItem{put(10, "a1"), del(12)}}}}}, "broke reliable"},
		{"an acknowledged write missing everywhere", []*watchLog{reference(put(10, "a1"), del(12))}, "broke reliable"},
		{"a partial put", []*watchLog{reference(put(10, "a1"), felix.CacheWatchItem{Offset: 11, Op: "put", Key: "w/0/p0"}, del(12))}, "broke atomic"},
		{"two watches disagree", []*watchLog{good, {Name: "other", Sessions: []*watchSession{{Filter: filter, Start: 10, End: 12, Items: []felix.CacheWatchItem{put(10, "a1"), put(11, "zz")}}}}}, "broke atomic"},
		{"a duplicate after a resume", []*watchLog{good, {Name: "dup", Sessions: []*watchSession{
			{Filter: filter, Start: 10, End: 12, Items: []felix.CacheWatchItem{put(10, "a1"), put(11, "a2")}},
			{Filter: filter, From: from(12), Start: 12, End: 13, Items: []felix.CacheWatchItem{put(11, "a2"), del(12)}}}}}, "broke unique"},
		{"a resume that skips", []*watchLog{good, {Name: "skip", Sessions: []*watchSession{
			{Filter: filter, Start: 10, End: 11, Items: []felix.CacheWatchItem{put(10, "a1")}},
			{Filter: filter, From: from(11), Start: 11, End: 13, Items: []felix.CacheWatchItem{del(12)}}}}}, "broke resumable"},
		{"a resnapshot with a stale value", []*watchLog{good, {Name: "resnap", Sessions: []*watchSession{
			{Filter: filter, From: from(5), Start: 5, Resnapshot: true, End: 12, Items: []felix.CacheWatchItem{
				{Offset: 10, Op: "put", Key: "w/0/p0", Value: []byte("a1"), Retained: true}, {Offset: 12, StateComplete: true, Count: 1}}}}}}, "broke resumable"},
		{"a state item that miscounts", []*watchLog{good, {Name: "count", Sessions: []*watchSession{
			{Filter: filter, From: from(5), Start: 5, Resnapshot: true, End: 12, Items: []felix.CacheWatchItem{
				{Offset: 11, Op: "put", Key: "w/0/p0", Value: []byte("a2"), Retained: true}, {Offset: 12, StateComplete: true, Count: 2}}}}}}, "broke atomic"},
	}
	for _, tc := range cases {
		errs := validateWatches(tc.logs, writes(), true)
		if tc.wants == "" {
			for _, err := range errs {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		found := false
		for _, err := range errs {
			found = found || strings.HasPrefix(err.Error(), tc.wants)
		}
		if !found {
			t.Errorf("%s: want %q among %v", tc.name, tc.wants, errs)
		}
	}
}

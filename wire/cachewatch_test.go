package wire

import (
	"reflect"
	"testing"
)

func TestCacheWatchMessagesRoundTrip(t *testing.T) {
	from, id, exp := uint64(7), uint64(3), uint64(1_700_000_000_000)
	for _, m := range []Message{
		&CacheWatch{TenantID: "a", Namespace: "b", Cache: "c", Key: "user-", Prefix: true, FromOffset: &from, WatchID: &id, RequestID: 1},
		&CacheWatch{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", Retained: true, RequestID: 2},
		&CacheWatchOK{RequestID: 2, WatchID: 3, Offset: 1 << 62, Resnapshot: true},
		&CacheChange{Offset: 5, Op: CacheOpPut, Key: "k", Value: []byte{}, ExpiresAtMs: &exp, Retained: true},
		&CacheChange{Offset: 6, Op: CacheOpExpire, Key: "k"},
		&CacheWatchState{Offset: 9, Count: 2},
		&CacheWatchLagged{WatchID: 3, ResumeFrom: 9},
	} {
		b, err := AppendMessageFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseMessage(b[HeaderLen:])
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip of %#v gave %#v", m, got)
		}
	}
}

func TestCacheWatchValidate(t *testing.T) {
	from := uint64(1)
	for _, c := range []struct {
		m  Validator
		ok bool
	}{
		{&CacheWatch{TenantID: "a", Namespace: "b", Cache: "c", Key: "k"}, true},
		{&CacheWatch{TenantID: "a", Namespace: "b", Cache: "c", Prefix: true}, true},
		{&CacheWatch{TenantID: "a", Namespace: "b", Cache: "c"}, false},
		{&CacheWatch{TenantID: "a", Namespace: "b", Key: "k"}, false},
		{&CacheWatch{TenantID: "a", Namespace: "b", Cache: "c", Key: "k", Retained: true, FromOffset: &from}, false},
		{&CacheChange{Op: CacheOpPut, Key: "k", Value: []byte{}}, true},
		{&CacheChange{Op: CacheOpPut, Key: "k"}, false},
		{&CacheChange{Op: CacheOpDelete, Key: "k", Value: []byte{}}, false},
		{&CacheChange{Op: "zap", Key: "k"}, false},
	} {
		if err := c.m.Validate(); (err == nil) != c.ok {
			t.Errorf("%#v: Validate() = %v", c.m, err)
		}
	}
}

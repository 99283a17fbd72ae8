package core

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestCache(t *testing.T, spec wire.CacheSpec) (*Broker, *Cache) {
	t.Helper()
	b := NewBroker(Config{CacheShards: 4})
	t.Cleanup(b.Close)
	if spec.TenantID == "" {
		spec.TenantID, spec.Namespace, spec.Cache = "t", "ns", "c"
	}
	if err := b.ApplyCache(spec); err != nil {
		t.Fatal(err)
	}
	c, ok := b.Cache(CacheKey{spec.TenantID, spec.Namespace, spec.Cache})
	if !ok {
		t.Fatal("cache not registered")
	}
	return b, c
}

func TestCacheTTLExpiry(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{})
	if err := c.Put("k", []byte("v"), 10*time.Second, testNow); err != nil {
		t.Fatal(err)
	}
	if err := c.Put("forever", []byte("v"), 0, testNow); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Get("k", testNow.Add(9*time.Second)); !ok || string(v) != "v" {
		t.Fatalf("before expiry: %q %v", v, ok)
	}
	if _, ok := c.Get("k", testNow.Add(10*time.Second)); ok {
		t.Fatal("entry visible at its expiry time")
	}
	if n, _ := c.Len(); n != 1 {
		t.Errorf("expired entry not removed by Get: %d entries", n)
	}
	if _, ok := c.Get("forever", testNow.Add(1000*time.Hour)); !ok {
		t.Error("entry without ttl expired")
	}
}

func TestCachePutCopiesValue(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{})
	buf := []byte("hello")
	if err := c.Put("k", buf, 0, testNow); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	if v, _ := c.Get("k", testNow); string(v) != "hello" {
		t.Fatalf("value changed with the caller's buffer: %q", v)
	}
}

func TestCacheDeleteReturnsRemovedValue(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{})
	c.Put("k", []byte("v1"), 0, testNow)
	if v, ok, _ := c.Delete("k", testNow); !ok || string(v) != "v1" {
		t.Fatalf("delete returned %q %v", v, ok)
	}
	if _, ok, _ := c.Delete("k", testNow); ok {
		t.Fatal("second delete found the key")
	}
	c.Put("e", []byte("v"), time.Second, testNow)
	if _, ok, _ := c.Delete("e", testNow.Add(time.Second)); ok {
		t.Fatal("delete of an expired key reported a value")
	}
	if n, b := c.Len(); n != 0 || b != 0 {
		t.Fatalf("after deletes: %d entries %d bytes", n, b)
	}
}

func TestCachesAreIndependent(t *testing.T) {
	b, c1 := newTestCache(t, wire.CacheSpec{})
	if err := b.ApplyCache(wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "other"}); err != nil {
		t.Fatal(err)
	}
	c2, _ := b.Cache(CacheKey{"t", "ns", "other"})
	c1.Put("k", []byte("one"), 0, testNow)
	c2.Put("k", []byte("two"), 0, testNow)
	v1, _ := c1.Get("k", testNow)
	v2, _ := c2.Get("k", testNow)
	if string(v1) != "one" || string(v2) != "two" {
		t.Fatalf("same key in two caches: %q %q", v1, v2)
	}
}

func TestCacheFull(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{MaxEntries: 3, MaxBytes: 100})
	for i := range 3 {
		if err := c.Put(fmt.Sprint("k", i), []byte("v"), 0, testNow); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Put("k3", []byte("v"), 0, testNow)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeOverloaded || we.Retry != wire.RetryRetryAfter || we.Detail["reason"] != "cache_full" {
		t.Fatalf("fourth entry: %v", err)
	}
	// Replacing an existing key needs no new entry, only the size difference.
	if err := c.Put("k0", make([]byte, 90), 0, testNow); err != nil {
		t.Fatalf("replacing within the byte bound: %v", err)
	}
	if err := c.Put("k1", make([]byte, 10), 0, testNow); err == nil {
		t.Fatal("byte bound not enforced")
	}
	if err := c.Put("k0", []byte("small"), 0, testNow); err != nil {
		t.Fatal(err)
	}
	if err := c.Put("k1", make([]byte, 10), 0, testNow); err != nil {
		t.Fatalf("shrinking a value did not free its bytes: %v", err)
	}
	if err := c.Put("huge", make([]byte, 200), 0, testNow); !errors.As(err, &we) || we.Code != wire.CodeInvalidRequest {
		t.Fatalf("entry larger than the cache: %v", err)
	}
	if n, _ := c.Len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
}

func TestCacheFullReclaimsExpired(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{MaxEntries: 1})
	c.Put("a", []byte("v"), time.Second, testNow)
	if err := c.Put("b", []byte("v"), 0, testNow.Add(2*time.Second)); err != nil {
		// a and b may sit in different lock shards; then a stays until swept.
		c.Sweep(testNow.Add(2 * time.Second))
		if err := c.Put("b", []byte("v"), 0, testNow.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCacheSweep(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{})
	for i := range 10 {
		ttl := time.Duration(i%2) * time.Second // half without ttl
		c.Put(fmt.Sprint("k", i), []byte("v"), ttl, testNow)
	}
	if n := c.Sweep(testNow.Add(500 * time.Millisecond)); n != 0 {
		t.Fatalf("swept %d before expiry", n)
	}
	if n := c.Sweep(testNow.Add(time.Second)); n != 5 {
		t.Fatalf("swept %d, want 5", n)
	}
	if n, b := c.Len(); n != 5 || b != 5*3 {
		t.Fatalf("after sweep: %d entries %d bytes", n, b)
	}
}

func TestCacheApplyKeepsEntries(t *testing.T) {
	b, c := newTestCache(t, wire.CacheSpec{})
	c.Put("k", []byte("v"), 0, testNow)
	if err := b.ApplyCache(wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c", MaxEntries: 10}); err != nil {
		t.Fatal(err)
	}
	c2, _ := b.Cache(CacheKey{"t", "ns", "c"})
	if c2 != c {
		t.Fatal("update replaced the cache")
	}
	if e, _ := c.Limits(); e != 10 {
		t.Errorf("max entries %d after update", e)
	}
	if _, ok := c.Get("k", testNow); !ok {
		t.Error("entry lost on update")
	}
}

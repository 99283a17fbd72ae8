package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// felix admin stream info asks the broker for a durable stream's shards:
// the records, offsets and bytes each log holds, its subscribers and the
// rates between two looks.
func TestAdminStreamInfo(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "infod", "--durable", "--shards", "2")
	n.mustFelix(ctx, "pub", "--ack", "infod", "a", "b", "c", "d", "e")

	var info struct {
		Stream  string `json:"stream"`
		Durable bool   `json:"durable"`
		Shards  []struct {
			Shard          uint32   `json:"shard"`
			FirstOffset    *uint64  `json:"first_offset"`
			LastOffset     *uint64  `json:"last_offset"`
			NextOffset     uint64   `json:"next_offset"`
			Records        uint64   `json:"records"`
			Bytes          int64    `json:"bytes"`
			Subscribers    int      `json:"subscribers"`
			PublishedTotal uint64   `json:"published_total"`
			PublishRate    *float64 `json:"publish_rate"`
		} `json:"shards"`
	}
	out := n.mustFelix(ctx, "admin", "stream", "info", "infod", "--interval", "100ms", "-o", "json")
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("stream info -o json: %v\n%s", err, out)
	}
	if info.Stream != "infod" || !info.Durable || len(info.Shards) != 2 {
		t.Fatalf("stream info: %s", out)
	}
	var records uint64
	for _, sh := range info.Shards {
		records += sh.Records
		if sh.Records > 0 && (sh.FirstOffset == nil || sh.LastOffset == nil || *sh.LastOffset-*sh.FirstOffset+1 != sh.Records || sh.Bytes <= 0) {
			t.Errorf("shard %d: offsets and records disagree: %s", sh.Shard, out)
		}
		if sh.PublishedTotal != sh.NextOffset || sh.PublishRate == nil {
			t.Errorf("shard %d: counters: %s", sh.Shard, out)
		}
	}
	if records != 5 {
		t.Fatalf("the shards hold %d records, want 5: %s", records, out)
	}

	text := n.mustFelix(ctx, "admin", "stream", "info", "infod", "--interval", "0")
	if !strings.Contains(text, "SUBSCRIBERS") || len(strings.Split(strings.TrimSpace(text), "\n")) != 3 {
		t.Fatalf("stream info table:\n%s", text)
	}
	if _, errOut, code := n.felix(ctx, "admin", "stream", "info", "ghost", "--interval", "0"); code == 0 || !strings.Contains(errOut, "not") {
		t.Fatalf("stream info of a missing stream: exit %d, %s", code, errOut)
	}
}

// felix cache keys lists a prefix a bounded page at a time, says how to
// get the next page, and follows them all with --all.
func TestCacheKeys(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "cache", "create", "kv")
	want := []string{"user:1", "user:2", "user:3", "user:4", "user:5"}
	for _, k := range append(slices.Clone(want), "order:1") {
		n.mustFelix(ctx, "cache", "put", "kv", k, "v")
	}
	out, errOut, code := n.felix(ctx, "cache", "keys", "kv", "--prefix", "user:", "--limit", "2")
	if code != 0 || out != "user:1\nuser:2\n" || !strings.Contains(errOut, "--after user:2") {
		t.Fatalf("first page: exit %d\nstdout: %q\nstderr: %q", code, out, errOut)
	}
	out = n.mustFelix(ctx, "cache", "keys", "kv", "--prefix", "user:", "--limit", "2", "--after", "user:2")
	if out != "user:3\nuser:4\n" {
		t.Fatalf("second page: %q", out)
	}
	out = n.mustFelix(ctx, "cache", "keys", "kv", "--prefix", "user:", "--limit", "2", "--all")
	if got := strings.Fields(out); !slices.Equal(got, want) {
		t.Fatalf("--all: %q", got)
	}
	var page struct {
		Keys []string `json:"keys"`
		Next *string  `json:"next"`
	}
	out = n.mustFelix(ctx, "cache", "keys", "kv", "--limit", "4", "-o", "json")
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Keys) != 4 || page.Next == nil || *page.Next != page.Keys[3] {
		t.Fatalf("-o json: %v %s", err, out)
	}
	if _, _, code := n.felix(ctx, "cache", "keys", "kv", "--limit", "0"); code != 2 {
		t.Fatalf("--limit 0: exit %d, want a usage error", code)
	}
}

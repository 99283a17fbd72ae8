package main

import (
	"bufio"
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Which storage Felix's caches used is read off the broker while a cache
// run goes: a log-backed cache writes files under the broker's storage
// directory (FELIX_DURABLE_STORAGE_DIR/caches) and counts its key index in
// felix_cache_index_bytes; an in-memory one does neither.

// cacheStorage is what one probe saw.
type cacheStorage struct {
	files       bool // files under the storage directory's caches/
	indexBytes  bool // felix_cache_index_bytes above 0
	indexMetric bool // the broker exports felix_cache_index_bytes at all
}

func (s cacheStorage) logBacked() bool { return s.files || s.indexBytes }

// note is the workload note for what the probe saw.
func (s cacheStorage) note() string {
	switch {
	case s.logBacked():
		return "Felix's caches were log-backed (files under its storage directory during the runs), fsync as each case says."
	case s.indexMetric:
		return "Felix kept its caches in memory (nothing under its storage directory, felix_cache_index_bytes 0), so its fsync setting did not apply to them."
	default:
		return "Felix kept its caches in memory: this build has no log-backed cache (nothing under its storage directory, no felix_cache_index_bytes), so its fsync setting did not apply to them."
	}
}

// probeCacheStorage samples n until ctx ends or a log-backed cache is seen.
func probeCacheStorage(ctx context.Context, n *felixNode) cacheStorage {
	var s cacheStorage
	dir := filepath.Join(n.dir, "durable", "caches")
	for {
		s.files = s.files || dirBytes(dir) > 0
		if v, ok := scrapeGauge(ctx, n.metrics+"/metrics", "felix_cache_index_bytes"); ok {
			s.indexMetric, s.indexBytes = true, s.indexBytes || v > 0
		}
		if s.logBacked() {
			return s
		}
		select {
		case <-ctx.Done():
			return s
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scrapeGauge reads an unlabelled sample of name from a Prometheus text
// page; ok is false when the page has none.
func scrapeGauge(ctx context.Context, url, name string) (float64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	return gaugeIn(bufio.NewScanner(resp.Body), name)
}

func gaugeIn(sc *bufio.Scanner, name string) (float64, bool) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil
	}
	return 0, false
}

// felixCacheBench runs a `felix bench cache` against n while probing which
// storage its cache used, and adds that to the workload's notes.
func (e *env) felixCacheBench(ctx context.Context, workload string, n *felixNode, d time.Duration, tr string, args ...string) (figures, error) {
	pctx, stop := context.WithCancel(ctx)
	seen := make(chan cacheStorage, 1)
	go func() { seen <- probeCacheStorage(pctx, n) }()
	f, err := e.felixBench(ctx, n, d, tr, append([]string{"cache"}, args...)...)
	stop()
	s := <-seen
	if err == nil {
		e.addNote(workload, s.note())
	}
	return f, err
}

// addNote adds text to the workload's notes once.
func (e *env) addNote(workload, text string) {
	if !strings.Contains(e.warnings[workload], text) {
		e.warnings[workload] = strings.TrimSpace(e.warnings[workload] + " " + text)
	}
}

package catalogsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/felixmq/felix/wire"
)

// fakeSource is an in-memory catalog with a change log per kind.
type fakeSource struct {
	mu       sync.Mutex
	seq      uint64
	log      map[wire.CatalogKind][]wire.CatalogItem
	live     map[wire.CatalogKind]map[string]wire.CatalogItem
	trimmed  map[wire.CatalogKind]uint64 // changes at or below are forgotten
	fail     map[string]error            // "snapshot:<kind>", "changes:<kind>", "jwks"
	pageSize int
	calls    []string
	jwks     []byte
	cluster  string // stamped on every page
}

func newFakeSource() *fakeSource {
	return &fakeSource{log: map[wire.CatalogKind][]wire.CatalogItem{},
		live: map[wire.CatalogKind]map[string]wire.CatalogItem{}, trimmed: map[wire.CatalogKind]uint64{},
		fail: map[string]error{}, pageSize: 100, jwks: []byte(`{"keys":[]}`)}
}

func (f *fakeSource) record(kind wire.CatalogKind, op wire.ChangeOp, it wire.CatalogItem) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	it.Seq, it.Op = f.seq, op
	id, err := itemID(kind, &it)
	if err != nil {
		panic(err)
	}
	if f.live[kind] == nil {
		f.live[kind] = map[string]wire.CatalogItem{}
	}
	if op == wire.OpPut {
		f.live[kind][id] = it
	} else {
		delete(f.live[kind], id)
	}
	f.log[kind] = append(f.log[kind], it)
}

func (f *fakeSource) put(kind wire.CatalogKind, it wire.CatalogItem) {
	f.record(kind, wire.OpPut, it)
}
func (f *fakeSource) del(kind wire.CatalogKind, it wire.CatalogItem) {
	f.record(kind, wire.OpDelete, it)
}

// trim forgets the change log of kind up to now, so older cursors reset.
func (f *fakeSource) trim(kind wire.CatalogKind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trimmed[kind] = f.seq
}

// become makes f serve other's catalog from now on, as a control plane
// that came back with other state would.
func (f *fakeSource) become(other *fakeSource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	other.mu.Lock()
	defer other.mu.Unlock()
	f.seq, f.log, f.live, f.trimmed, f.cluster = other.seq, other.log, other.live, other.trimmed, other.cluster
}

func (f *fakeSource) setFail(key string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, key)
	} else {
		f.fail[key] = err
	}
}

func (f *fakeSource) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeSource) enter(key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, key)
	return f.fail[strings.SplitN(key, "@", 2)[0]]
}

func (f *fakeSource) Snapshot(_ context.Context, kind wire.CatalogKind) (*wire.CatalogPage, error) {
	if err := f.enter("snapshot:" + string(kind)); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &wire.CatalogPage{Kind: kind, Seq: f.seq, ClusterID: f.cluster}
	ids := make([]string, 0, len(f.live[kind]))
	for id := range f.live[kind] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p.Items = append(p.Items, f.live[kind][id])
	}
	return p, nil
}

func (f *fakeSource) Changes(_ context.Context, kind wire.CatalogKind, since uint64) (*wire.CatalogPage, error) {
	if err := f.enter(fmt.Sprintf("changes:%s@%d", kind, since)); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if since < f.trimmed[kind] {
		return &wire.CatalogPage{Kind: kind, Seq: f.seq, Reset: true, ClusterID: f.cluster}, nil
	}
	p := &wire.CatalogPage{Kind: kind, Seq: since, ClusterID: f.cluster}
	for _, it := range f.log[kind] {
		if it.Seq > since && len(p.Items) < f.pageSize {
			p.Items = append(p.Items, it)
			p.Seq = it.Seq
		}
	}
	return p, nil
}

func (f *fakeSource) JWKS(context.Context) ([]byte, error) {
	if err := f.enter("jwks"); err != nil {
		return nil, err
	}
	return f.jwks, nil
}

// recorder is an Applier that logs every call as a short string.
type recorder struct {
	calls      []string
	failStream string // ApplyStream of this stream name fails
}

func (r *recorder) add(format string, args ...any) {
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}
func (r *recorder) take() []string {
	c := r.calls
	r.calls = nil
	return c
}

func (r *recorder) ApplyTenant(t wire.Tenant)       { r.add("+tenant %s %s", t.TenantID, t.DisplayName) }
func (r *recorder) RemoveTenant(id string)          { r.add("-tenant %s", id) }
func (r *recorder) ApplyNamespace(n wire.Namespace) { r.add("+ns %s/%s", n.TenantID, n.Namespace) }
func (r *recorder) RemoveNamespace(t, ns string)    { r.add("-ns %s/%s", t, ns) }
func (r *recorder) ApplyStream(s wire.StreamSpec) error {
	r.add("+stream %s/%s/%s shards=%d", s.TenantID, s.Namespace, s.Stream, s.Shards)
	if s.Stream == r.failStream {
		return errors.New("refused by test")
	}
	return nil
}
func (r *recorder) RemoveStream(s wire.StreamSpec) {
	if s.Incarnation != "" {
		r.add("-stream %s/%s/%s shards=%d incarnation=%s", s.TenantID, s.Namespace, s.Stream, s.Shards, s.Incarnation)
		return
	}
	r.add("-stream %s/%s/%s shards=%d", s.TenantID, s.Namespace, s.Stream, s.Shards)
}
func (r *recorder) ForgetStream(s wire.StreamSpec) {
	r.add("~stream %s/%s/%s", s.TenantID, s.Namespace, s.Stream)
}
func (r *recorder) ForgetCache(c wire.CacheSpec) {
	r.add("~cache %s/%s/%s", c.TenantID, c.Namespace, c.Cache)
}
func (r *recorder) SetCluster(id string) { r.add("cluster %s", id) }
func (r *recorder) ApplyCache(c wire.CacheSpec) error {
	r.add("+cache %s/%s/%s", c.TenantID, c.Namespace, c.Cache)
	return nil
}
func (r *recorder) RemoveCache(c wire.CacheSpec) {
	r.add("-cache %s/%s/%s", c.TenantID, c.Namespace, c.Cache)
}

func tenant(id string) wire.CatalogItem {
	return wire.CatalogItem{Tenant: &wire.Tenant{TenantID: id}}
}
func namespace(t, ns string) wire.CatalogItem {
	return wire.CatalogItem{Namespace: &wire.Namespace{TenantID: t, Namespace: ns}}
}
func stream(t, ns, s string, shards uint32) wire.CatalogItem {
	return wire.CatalogItem{Stream: &wire.StreamSpec{TenantID: t, Namespace: ns, Stream: s, Shards: shards}}
}
func cache(t, ns, c string) wire.CatalogItem {
	return wire.CatalogItem{Cache: &wire.CacheSpec{TenantID: t, Namespace: ns, Cache: c}}
}

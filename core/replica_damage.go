package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/felixmq/felix/internal/atomicfile"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// Damaged copies (#18, the Jepsen scenario "a replica whose data was
// corrupted or truncated while down must not win an election").
//
// A replicated copy promises records: a follower answers its leader how
// far it holds the log durably, and a Quorum leader counts that answer
// towards its majority; every heartbeat reports it to the control plane,
// which promotes a leader-consistency follower on it. A copy whose files
// lost records while its broker was down (a segment truncated or
// removed, a record whose CRC fails) no longer holds what it promised,
// and counting it would let a takeover open a copy short of acknowledged
// records (the NATS JetStream 2.12.1 failure). So a copy is *damaged*
// when, at open:
//
//  1. its log refuses to recover (a bad record before good ones, a
//     missing segment): the copy is moved aside, whole, to
//     <storage>/damaged/<tenant>/<namespace>/<stream>/<shard>-<unix ns>
//     for an operator, and an empty copy takes its place (its fence
//     kept); or
//  2. it ends before the durable offset this broker last promised for it
//     (the promises file, below), at a generation not older than its
//     fence: whatever cut it (a torn tail cut by recovery, a segment
//     truncated at a record boundary, the newest segment gone), records it
//     promised are gone. A torn tail past the promise (a write the crash
//     cut off, never answered) is not damage.
//
// A damaged copy keeps a marker file (`damaged`, beside its segments)
// until a leader has refilled it: once it holds the promised offset again,
// or its leader's whole log, the marker goes. Meanwhile the broker does
// not report the copy's position (so a leader-consistency shard never
// promotes it), and its fence answer says it is damaged (so a Quorum
// takeover does not count it towards its majority).
//
// The promises file (`promised`, in the storage directory) holds, per
// replicated shard copy, the generation and durable offset of the last
// heartbeat report that named it; the broker writes it (temporary file,
// fsync, rename) before the heartbeat goes out, only when it changed.
// Records promised after the last report written are not covered: a copy
// that lost only those is not found damaged.

const (
	promisesFile     = "promised"
	damagedMarker    = "damaged"
	damagedAsideRoot = "damaged"
)

// Promise is one copy's last reported position.
type Promise struct {
	Key        StreamKey
	Shard      uint32
	Generation uint64
	Durable    uint64
}

// promiseKey names a copy: the stream's incarnation keeps a promise from
// outliving the stream it was made for.
type promiseKey struct {
	StreamKey
	Incarnation string
	Shard       uint32
}

type promiseEntry struct {
	Tenant      string `json:"tenant"`
	Namespace   string `json:"namespace"`
	Stream      string `json:"stream"`
	Incarnation string `json:"incarnation,omitempty"`
	Shard       uint32 `json:"shard"`
	Generation  uint64 `json:"generation"`
	Durable     uint64 `json:"durable"`
}

// promiseStore is the broker's promises file, in memory and on disk.
type promiseStore struct {
	mu     sync.Mutex
	loaded bool
	m      map[promiseKey]promiseEntry
	dirty  bool
}

func (ps *promiseStore) path(c *StorageConfig) string { return filepath.Join(c.Dir, promisesFile) }

// loadLocked reads the file once. One that does not parse is ignored,
// logged: no copy is then found damaged by its promise.
func (ps *promiseStore) loadLocked(c *StorageConfig) {
	if ps.loaded {
		return
	}
	ps.loaded = true
	ps.m = map[promiseKey]promiseEntry{}
	b, err := os.ReadFile(ps.path(c))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var list []promiseEntry
	if err == nil {
		err = json.Unmarshal(b, &list)
	}
	if err != nil {
		c.logger().Warn("the promises file cannot be read; copies truncated while the broker was down will not be found damaged by it", "path", ps.path(c), "err", err)
		return
	}
	for _, e := range list {
		ps.m[promiseKey{StreamKey{e.Tenant, e.Namespace, e.Stream}, e.Incarnation, e.Shard}] = e
	}
}

func (ps *promiseStore) get(c *StorageConfig, k promiseKey) (promiseEntry, bool) {
	if ps == nil {
		return promiseEntry{}, false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.loadLocked(c)
	e, ok := ps.m[k]
	return e, ok
}

func (ps *promiseStore) forget(c *StorageConfig, k promiseKey) {
	if ps == nil {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.loadLocked(c)
	if _, ok := ps.m[k]; ok {
		delete(ps.m, k)
		ps.dirty = true
	}
}

// RecordPromises keeps the positions a heartbeat is about to report as
// what each copy promised, and writes the promises file when that
// changed. Copies not named keep their last promise (a copy no leader has
// shipped to since a restart is not reported); promises of a stream held
// at another incarnation are dropped, and so are those of a stream
// deleted (DeleteStream).
// Without durable storage it does nothing.
func (b *Broker) RecordPromises(ps []Promise) error {
	c := b.cfg.Storage
	if c == nil || c.Dir == "" {
		return nil
	}
	// The streams held, read before the store's lock: it is never held
	// while another is taken (a replica opens under its stream's lock and
	// then takes it).
	incs := map[StreamKey]string{}
	b.mu.Lock()
	for k, s := range b.streams {
		incs[k] = s.Spec().Incarnation
	}
	b.mu.Unlock()
	st := b.cfg.promises
	st.mu.Lock()
	defer st.mu.Unlock()
	st.loadLocked(c)
	for _, p := range ps {
		inc, ok := incs[p.Key]
		if !ok {
			continue
		}
		k := promiseKey{p.Key, inc, p.Shard}
		e := promiseEntry{Tenant: p.Key.Tenant, Namespace: p.Key.Namespace, Stream: p.Key.Stream, Incarnation: inc,
			Shard: p.Shard, Generation: p.Generation, Durable: p.Durable}
		if st.m[k] != e {
			st.m[k] = e
			st.dirty = true
		}
	}
	for k := range st.m {
		// A stream not held (yet: the catalog may not have reached a
		// broker just started) keeps its promises; one held at another
		// incarnation was deleted and created again.
		if inc, ok := incs[k.StreamKey]; ok && inc != k.Incarnation {
			delete(st.m, k)
			st.dirty = true
		}
	}
	return st.writeLocked(c)
}

// writeLocked writes the file when it changed.
func (ps *promiseStore) writeLocked(c *StorageConfig) error {
	if !ps.dirty {
		return nil
	}
	list := make([]promiseEntry, 0, len(ps.m))
	for _, e := range ps.m {
		list = append(list, e)
	}
	raw, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(c.Dir, promisesFile), raw, 0o600); err != nil {
		return fmt.Errorf("writing the promises file: %w", err)
	}
	ps.dirty = false
	return nil
}

// lower takes back what a copy promised past off, durably: its leader
// cut it there (a suffix no majority held), which is no damage.
func (ps *promiseStore) lower(c *StorageConfig, k promiseKey, off uint64) error {
	if ps == nil || c == nil || c.Dir == "" {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.loadLocked(c)
	e, ok := ps.m[k]
	if !ok || e.Durable <= off {
		return nil
	}
	e.Durable = off
	ps.m[k] = e
	ps.dirty = true
	return ps.writeLocked(c)
}

// cutPromise is lower for the replica's own promise.
func (r *Replica) cutPromise(off uint64) error {
	return r.st.cfg.promises.lower(r.st.cfg.Storage, promiseKey{r.st.key, r.st.Spec().Incarnation, r.index}, off)
}

// damage is what a damaged copy must hold again before it counts.
type damage struct {
	// Until is the offset the copy promised (or held, as far as its
	// damaged files showed): it is whole again once it holds it.
	Until  uint64 `json:"until"`
	Reason string `json:"reason"`
	AtMs   int64  `json:"at_ms"`
}

// readDamage returns the marker kept in dir, if any. A marker that does
// not parse still marks the copy damaged (until its leader's whole log).
func readDamage(dir string) (*damage, error) {
	b, err := os.ReadFile(filepath.Join(dir, damagedMarker))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d damage
	if json.Unmarshal(b, &d) != nil {
		d = damage{Until: ^uint64(0), Reason: "unreadable marker"}
	}
	return &d, nil
}

// setAside moves a copy whose log refuses to recover out of the way, to
// <storage>/damaged/..., and makes dir an empty copy again with the fence
// it had. It returns where the old copy went.
func setAside(c *StorageConfig, k StreamKey, shard uint32, dir string, fenced uint64) (string, error) {
	aside := filepath.Join(c.Dir, damagedAsideRoot, k.Tenant, k.Namespace, k.Stream,
		strconv.FormatUint(uint64(shard), 10)+"-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	if err := os.MkdirAll(filepath.Dir(aside), 0o700); err != nil {
		return "", err
	}
	if err := os.Rename(dir, aside); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return aside, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
		return aside, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(aside)); err != nil {
		return aside, err
	}
	if fenced > 0 {
		if err := writeFence(dir, fenced); err != nil {
			return aside, err
		}
	}
	return aside, nil
}

// openReplicaLog opens a copy's log at dir and decides whether it is
// damaged (see above). The fence is the copy's.
func (st *Stream) openReplicaLog(i uint32, dir string, fenced uint64) (*flog.Log, *damage, error) {
	c := st.cfg.Storage
	opts := flog.Options{
		Dir: dir, SegmentBytes: c.SegmentBytes, Fsync: c.Fsync, FsyncInterval: c.FsyncInterval,
		Retention: c.retentionFor(st.Spec()), Logger: c.logger(), FS: c.FS,
	}
	attrs := []any{"tenant", st.key.Tenant, "namespace", st.key.Namespace, "stream", st.key.Stream, "shard", i, "dir", dir}
	dmg, err := readDamage(dir)
	if err != nil {
		return nil, nil, err
	}
	prom, promised := st.cfg.promises.get(c, promiseKey{st.key, st.Spec().Incarnation, i})
	lg, rep, err := flog.Open(opts)
	var ce *flog.CorruptionError
	if errors.As(err, &ce) {
		until := uint64(0)
		if promised {
			until = prom.Durable
		}
		if ce.HasLastGood {
			until = max(until, ce.LastGoodOffset+1)
		}
		if dmg != nil {
			until = max(until, dmg.Until)
		}
		aside, aerr := setAside(c, st.key, i, dir, fenced)
		if aerr != nil {
			return nil, nil, fmt.Errorf("%w; setting the damaged copy aside failed: %v", err, aerr)
		}
		c.logger().Error("a replicated copy's log is damaged: set aside for an operator, an empty copy takes its place until its leader refills it",
			append(attrs, "aside", aside, "err", err, "refill_until", until)...)
		dmg = &damage{Until: until, Reason: ce.Error()}
		if lg, _, err = flog.Open(opts); err != nil {
			return nil, nil, err
		}
	} else if err != nil {
		return nil, nil, err
	}
	if rep != nil && rep.Truncated != nil {
		c.logger().Warn("a replicated copy's log had a torn tail; truncated it",
			append(attrs, "segment", rep.Truncated.Segment, "position", rep.Truncated.Position,
				"bytes", rep.Truncated.Bytes, "reason", rep.Truncated.Reason)...)
	}
	if dmg == nil && promised && fenced <= prom.Generation && lg.NextOffset() < prom.Durable {
		dmg = &damage{Until: prom.Durable, Reason: fmt.Sprintf("the copy ends at %d, before the durable offset %d it promised at generation %d", lg.NextOffset(), prom.Durable, prom.Generation)}
		c.logger().Error("a replicated copy lost records it promised while its broker was down: it counts for nothing until its leader refills it",
			append(attrs, "next", lg.NextOffset(), "promised", prom.Durable, "generation", prom.Generation)...)
	}
	if dmg != nil && dmg.AtMs == 0 {
		dmg.AtMs = time.Now().UnixMilli()
		raw, _ := json.Marshal(dmg)
		if err := atomicfile.Write(filepath.Join(dir, damagedMarker), raw, 0o600); err != nil {
			lg.Close()
			return nil, nil, fmt.Errorf("marking the copy damaged: %w", err)
		}
	}
	return lg, dmg, nil
}

// Damaged reports whether the copy lost records it promised and has not
// been refilled since (see above).
func (r *Replica) Damaged() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.damaged != nil
}

// ClearDamage forgets the copy's damage: a takeover made it whole (it
// fetched the furthest copy, or is it).
func (r *Replica) ClearDamage() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clearDamageLocked()
}

func (r *Replica) clearDamageLocked() error {
	if r.damaged == nil {
		return nil
	}
	if err := os.Remove(filepath.Join(r.dir, damagedMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := atomicfile.SyncDir(r.dir); err != nil {
		return err
	}
	r.st.cfg.Storage.logger().Info("a damaged replicated copy was refilled; it counts again",
		"stream", r.st.key.Stream, "shard", r.index, "next", r.log.NextOffset(), "until", r.damaged.Until)
	r.damaged = nil
	r.uncountDamage()
	return nil
}

// uncountDamage takes the copy out of felix_shard_replicas_damaged, once.
func (r *Replica) uncountDamage() {
	if r.damageCounted.CompareAndSwap(true, false) {
		r.st.cfg.metrics.replicasDamaged.Add(-1)
	}
}

// refilled clears the damage once the copy, written by a leader whose log
// ends at tail (0: not said), holds what it promised or that whole log.
func (r *Replica) refilled(tail uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.damaged == nil {
		return
	}
	d := r.log.DurableOffset()
	if d >= r.damaged.Until || (tail > 0 && d >= tail) {
		if err := r.clearDamageLocked(); err != nil {
			r.st.cfg.Storage.logger().Warn("clearing a refilled copy's damage marker", "stream", r.st.key.Stream, "shard", r.index, "err", err)
		}
	}
}

// ForgetPromise drops what the broker promised for its copy of shard of
// stream k: the copy left the replica set.
func (b *Broker) ForgetPromise(k StreamKey, shard uint32) {
	c := b.cfg.Storage
	s, ok := b.Stream(k)
	if c == nil || c.Dir == "" || !ok {
		return
	}
	b.cfg.promises.forget(c, promiseKey{k, s.Spec().Incarnation, shard})
}

// PromisesOf lists ps as promises (the broker's heartbeat positions).
func PromisesOf(ps []wire.ShardPosition) []Promise {
	out := make([]Promise, 0, len(ps))
	for _, p := range ps {
		if p.Kind != string(wire.ShardKindStream) {
			continue
		}
		out = append(out, Promise{Key: StreamKey{Tenant: p.TenantID, Namespace: p.Namespace, Stream: p.Name},
			Shard: p.Shard, Generation: p.Generation, Durable: p.Durable})
	}
	return out
}

// forgetStream drops every promise of the stream k's incarnation inc.
func (ps *promiseStore) forgetStream(c *StorageConfig, k StreamKey, inc string) {
	if ps == nil || c == nil || c.Dir == "" {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.loadLocked(c)
	for pk := range ps.m {
		if pk.StreamKey == k && pk.Incarnation == inc {
			delete(ps.m, pk)
			ps.dirty = true
		}
	}
	if err := ps.writeLocked(c); err != nil {
		c.logger().Warn("dropping a deleted stream's promises", "stream", k.Stream, "err", err)
	}
}

package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/felixmq/felix/core"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/wire"
)

// Taking over a replicated shard. A broker the view makes the leader of a
// durable shard that has followers does not open it at once (it answers
// not_ready meanwhile). It recovers first:
//
//  1. It fences its own copy and every follower's at its generation
//     (repl_fence): each copy promises to refuse records of an older
//     leader, durably, and says where it ends and the generation of its
//     last record. On a Quorum shard it goes on once a majority of the
//     replica set, itself included, has promised; on a leader-consistency
//     shard once every follower the view shows serving has (fenceRule).
//     Until then the shard waits.
//  2. Of the fenced copies it takes the furthest: the highest generation
//     of last record, then the longest. On a Quorum shard every
//     acknowledged record is on a majority, so on one of the fenced
//     copies, and the furthest holds them all; on a leader-consistency
//     shard the furthest reachable copy holds at least what the leader
//     last reported (placement promoted only a follower that held it).
//     When that copy is another broker's, it cuts its own back to where
//     the two agree (the end of its last record's generation in the
//     other copy) and fetches the rest (repl_read).
//  3. It opens the shard over its copy, appending a generation-start
//     record when the copy holds earlier records, and serves. Reads wait
//     until a majority holds the generation start (core.Stream.openAs);
//     its shippers bring the followers in line, cutting back a copy whose
//     suffix an older leader wrote and nobody committed.
//
// A leader restarted at the generation it had goes through the same
// steps, so it never serves a copy shorter than what it acknowledged.

// Peer calls of recovery.
const (
	TypeReplFence = "repl_fence"
	TypeReplRead  = "repl_read"
)

// replFence is repl_fence's header (and, with From and MaxRecords,
// repl_read's): the shard, and the generation of the leader asking.
type replFence struct {
	TenantID    string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	Stream      string `json:"stream"`
	Incarnation string `json:"incarnation,omitempty"`
	Shard       uint32 `json:"shard"`
	Generation  uint64 `json:"generation"`
	// repl_read only: the first offset wanted, how many records at most,
	// and (when set) a generation whose end in this copy to report.
	From       uint64  `json:"from,omitempty"`
	MaxRecords int     `json:"max_records,omitempty"`
	EndOf      *uint64 `json:"end_of,omitempty"`
}

// replFenced answers repl_fence (and repl_read, with EndOf): where the
// copy ends and the generation of its last record.
type replFenced struct {
	Next           uint64  `json:"next"`
	LastGeneration uint64  `json:"last_generation"`
	EndOf          *uint64 `json:"end_of,omitempty"`
	// Groups is the version of the group state the copy holds
	// (repl_fence only; repl_groups.go).
	Groups core.GroupVersion `json:"groups"`
	// Damaged says the copy lost records it promised and has not been
	// refilled (core/replica_damage.go): it is fenced, but a Quorum
	// takeover does not count it towards its majority.
	Damaged bool `json:"damaged,omitempty"`
}

// recoveries tracks the shards this broker is taking over.
type recoveries struct {
	mu sync.Mutex
	m  map[shardRef]*recovery
}

// recovery is one takeover under way.
type recovery struct {
	gen  uint64
	done chan struct{}
	stop context.CancelFunc
}

// needsRecovery reports whether a shard this broker gains must be taken
// over before it opens: a durable shard with followers, of either
// consistency (a promoted follower of a leader-consistency shard must not
// open a shorter log than another reachable copy either).
func needsRecovery(a wire.ShardAssignment) bool {
	return a.StorageID != "" && len(a.Replicas) > 0
}

// fenceRule is what a takeover of a must fence before it opens: on a
// Quorum shard any majority of the set, itself included (need; required
// is nil); on a leader-consistency shard itself and every follower whose
// broker the view shows serving (required). A leader-consistency shard's
// acknowledged records need not be on a majority, so a majority rule
// could open a short copy, and it would wait for ever on a set of two
// with one broker down; placement promotes only a follower that held the
// leader's last reported log, and the copies of brokers down or gone are
// not waited for (their records past that are what a leader-consistency
// shard may lose in a crash).
func (s *Server) fenceRule(a wire.ShardAssignment) (need int, required map[string]bool) {
	if a.Consistency == "quorum" {
		return (1+len(a.Replicas))/2 + 1, nil
	}
	required = map[string]bool{}
	if v := s.routes.view.Load(); v != nil {
		for _, rep := range a.Replicas {
			if b, ok := v.brokers[rep.NodeID]; ok && b.State.Serving() {
				required[rep.NodeID] = true
			}
		}
	}
	return 1 + len(required), required
}

// recoverShard starts (once per generation) the takeover of shard k/i
// at generation a.Generation and returns a channel closed when it ended.
func (s *Server) recoverShard(a wire.ShardAssignment) <-chan struct{} {
	ref := refOf(a)
	r := &s.repl.recov
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[shardRef]*recovery{}
	}
	if cur := r.m[ref]; cur != nil {
		if cur.gen == a.Generation {
			return cur.done
		}
		cur.stop()
	}
	ctx, cancel := context.WithCancel(s.bgCtx)
	rc := &recovery{gen: a.Generation, done: make(chan struct{}), stop: cancel}
	r.m[ref] = rc
	go func() {
		defer close(rc.done)
		defer cancel()
		s.runRecovery(ctx, a)
		r.mu.Lock()
		if r.m[ref] == rc {
			delete(r.m, ref)
		}
		r.mu.Unlock()
	}()
	return rc.done
}

// stopRecovery abandons the takeover of ref, if one runs (the view moved
// the shard elsewhere).
func (s *Server) stopRecovery(ref shardRef) {
	r := &s.repl.recov
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.m[ref]; cur != nil {
		cur.stop()
		delete(r.m, ref)
	}
}

// recovering returns the done channel of a takeover of ref under way.
func (s *Server) recovering(ref shardRef) (<-chan struct{}, bool) {
	r := &s.repl.recov
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.m[ref]; cur != nil {
		return cur.done, true
	}
	return nil, false
}

// runRecovery takes the shard over, trying again with a growing pause
// until it succeeds, the view moves the shard, or the broker stops.
func (s *Server) runRecovery(ctx context.Context, a wire.ShardAssignment) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := s.recoverOnce(ctx, a)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Info("taking over a shard: waiting", "stream", a.Name, "shard", a.Shard, "generation", a.Generation, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		// The shard serves nobody until this succeeds: keep asking often
		// (a follower whose view is behind answers once it fetched it).
		backoff = min(2*backoff, recoveryMaxBackoff)
	}
}

// recoveryMaxBackoff bounds the pause between takeover attempts.
const recoveryMaxBackoff = 500 * time.Millisecond

// fenceAnswer is one copy's answer to the fence.
type fenceAnswer struct {
	node string
	replFenced
}

// recoverOnce is one attempt of the takeover.
func (s *Server) recoverOnce(ctx context.Context, a wire.ShardAssignment) error {
	k := core.StreamKey{Tenant: a.TenantID, Namespace: a.Namespace, Stream: a.Name}
	if st, ok := s.core.Stream(k); !ok || (a.Incarnation != "" && st.Spec().Incarnation != "" && st.Spec().Incarnation != a.Incarnation) {
		return errors.New("the catalog has not brought the stream here yet")
	}
	if st, _ := s.core.Stream(k); st != nil {
		if sh, err := st.Shard(a.Shard); err == nil && sh != nil {
			return nil // open already (a view applied twice)
		}
	}
	own, err := s.core.OpenStreamReplica(k, a.Shard)
	if err != nil {
		return fmt.Errorf("opening this broker's copy: %w", err)
	}
	next, lastGen, err := own.Fence(a.Generation)
	if err != nil {
		return fmt.Errorf("fencing this broker's copy: %w", err)
	}
	ownGroups, err := own.GroupsVersion()
	if err != nil {
		return fmt.Errorf("reading this broker's group state: %w", err)
	}
	answers := []fenceAnswer{{node: s.routes.self, replFenced: replFenced{Next: next, LastGeneration: lastGen, Groups: ownGroups, Damaged: own.Damaged()}}}
	h := replFence{TenantID: a.TenantID, Namespace: a.Namespace, Stream: a.Name, Incarnation: a.Incarnation, Shard: a.Shard, Generation: a.Generation}
	type res struct {
		node string
		ans  replFenced
		err  error
	}
	results := make(chan res, len(a.Replicas))
	for _, rep := range a.Replicas {
		go func() {
			var ans replFenced
			err := s.replCall(ctx, rep.NodeID, TypeReplFence, h, nil, &ans, nil)
			results <- res{rep.NodeID, ans, err}
		}()
	}
	// On a Quorum shard any majority will do: it shares a copy with every
	// majority that acknowledged a record. On a leader-consistency shard
	// every serving follower must answer (fenceRule). The fences still
	// under way go on; a copy fenced late only refuses the old leader
	// sooner.
	need, required := s.fenceRule(a)
	fenced := func() bool {
		if required == nil {
			// A damaged copy may lack records it acknowledged: only the
			// whole ones make the majority that shares a copy with every
			// majority that acknowledged a record.
			whole := 0
			for _, an := range answers {
				if !an.Damaged {
					whole++
				}
			}
			return whole >= need
		}
		n := 0
		for _, an := range answers[1:] {
			if required[an.node] {
				n++
			}
		}
		return n == len(required)
	}
	var errs []error
	for range a.Replicas {
		if fenced() {
			break
		}
		r := <-results
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.node, r.err))
			continue
		}
		answers = append(answers, fenceAnswer{node: r.node, replFenced: r.ans})
	}
	if !fenced() {
		damaged := 0
		for _, an := range answers {
			if an.Damaged {
				damaged++
			}
		}
		return fmt.Errorf("%d of %d copies fenced (%d of them damaged, not counted), %d needed: %w", len(answers), 1+len(a.Replicas), damaged, need, errors.Join(errs...))
	}
	src := answers[0]
	for _, an := range answers[1:] {
		if an.LastGeneration > src.LastGeneration || (an.LastGeneration == src.LastGeneration && an.Next > src.Next) {
			src = an
		}
	}
	if src.node != s.routes.self {
		if err := s.fetchFrom(ctx, own, src, h); err != nil {
			return fmt.Errorf("catching up from %s: %w", src.node, err)
		}
	}
	if err := s.takeNewestGroups(ctx, own, answers, h); err != nil {
		return fmt.Errorf("taking the newest group state: %w", err)
	}
	// The copy is now the furthest fenced one: whatever damage it had,
	// it holds what the takeover found (on a Quorum shard, every
	// acknowledged record).
	if err := own.ClearDamage(); err != nil {
		return fmt.Errorf("clearing this broker's copy's damage marker: %w", err)
	}
	// Open only while the view still gives the shard to this broker at
	// this generation (a later view may have moved it meanwhile).
	s.own.mu.Lock()
	v := s.routes.view.Load()
	cur, ok := v.assignments[refOf(a)]
	if !ok || cur.NodeID != s.routes.self || cur.Generation != a.Generation || cur.Unavailable != "" || ctx.Err() != nil {
		s.own.mu.Unlock()
		return nil
	}
	err = s.core.OpenStreamShardAsNewLeader(k, a.Shard, a.Generation)
	s.own.mu.Unlock()
	if err != nil {
		return fmt.Errorf("opening the shard: %w", err)
	}
	s.log.Info("took over a shard", "stream", a.Name, "shard", a.Shard, "generation", a.Generation,
		"fenced", len(answers), "of", 1+len(a.Replicas), "copy_from", src.node, "next", src.Next)
	return nil
}

// fetchFrom brings this broker's copy in line with src's: it cuts its own
// copy back to where the two agree and appends what src holds past it.
func (s *Server) fetchFrom(ctx context.Context, own *core.Replica, src fenceAnswer, h replFence) error {
	myNext := own.NextOffset()
	myGen, err := own.GenerationBefore(myNext)
	if err != nil {
		return err
	}
	h.EndOf = &myGen
	h.From, h.MaxRecords = min(myNext, src.Next), 0
	var ans replFenced
	if _, err := s.replRead(ctx, src.node, h, &ans); err != nil {
		return err
	}
	agree := myNext
	if ans.EndOf != nil {
		agree = min(agree, *ans.EndOf)
	}
	if agree < myNext {
		if err := own.TruncateTo(agree); err != nil {
			return err
		}
	}
	h.EndOf = nil
	for from := agree; from < src.Next; {
		h.From, h.MaxRecords = from, shipMaxRecords
		recs, err := s.replRead(ctx, src.node, h, &ans)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return fmt.Errorf("%s sent nothing from offset %d (its copy ends at %d)", src.node, from, ans.Next)
		}
		if _, _, err := own.Append(ctx, h.Generation, recs); err != nil {
			return err
		}
		from = recs[len(recs)-1].Offset + 1
	}
	return nil
}

// replRead makes one repl_read call and decodes its records.
func (s *Server) replRead(ctx context.Context, node string, h replFence, ans *replFenced) ([]flog.Record, error) {
	var body []byte
	if err := s.replCall(ctx, node, TypeReplRead, h, nil, ans, &body); err != nil {
		return nil, err
	}
	return parseReplRecords(body, h.From, shipMaxRecords)
}

// replCall makes one replication call to node with header h and body,
// decoding the reply header into out and handing back the reply body.
func (s *Server) replCall(ctx context.Context, node, typ string, h any, body []byte, out any, replyBody *[]byte) error {
	ep := s.Peer()
	b, ok := s.routes.Broker(node)
	if ep == nil || !ok || b.PeerAddr == "" {
		return fmt.Errorf("no peer address for %s", node)
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, shipCallTimeout)
	defer cancel()
	rep, err := ep.Call(ctx, peer.Target{NodeID: node, Addr: b.PeerAddr}, peer.Request{Type: typ, Header: hb, Body: body})
	if err != nil {
		return err
	}
	if rep.Err != nil {
		return rep.Err
	}
	if replyBody != nil {
		*replyBody = rep.Body
	}
	return json.Unmarshal(rep.Header, out)
}

// serveReplFence is a copy's side of repl_fence: it promises its copy to
// the caller's generation and says where it ends.
func (s *Server) serveReplFence(from peer.Peer, req peer.Request) peer.Reply {
	var h replFence
	if err := json.Unmarshal(req.Header, &h); err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "%s header: %v", TypeReplFence, err))
	}
	r, e := s.backedReplica(from.NodeID, h)
	if e != nil {
		return peer.ErrorReply(e)
	}
	next, lastGen, err := r.Fence(h.Generation)
	if err != nil {
		return peer.ErrorReply(asWireError(err))
	}
	groups, err := r.GroupsVersion()
	if err != nil {
		return peer.ErrorReply(asWireError(err))
	}
	out, _ := json.Marshal(replFenced{Next: next, LastGeneration: lastGen, Groups: groups, Damaged: r.Damaged()})
	return peer.Reply{Header: out}
}

// serveReplRead is a copy's side of repl_read: records of its copy for a
// new leader catching up, and where a generation ends in it.
func (s *Server) serveReplRead(from peer.Peer, req peer.Request) peer.Reply {
	r, h, e := s.copyToRead(from, req, TypeReplRead)
	if e != nil {
		return peer.ErrorReply(e)
	}
	ans := replFenced{Next: r.NextOffset()}
	if h.EndOf != nil {
		end, err := r.EndOfGeneration(*h.EndOf)
		if err != nil {
			return peer.ErrorReply(asWireError(err))
		}
		ans.EndOf = &end
	}
	var body []byte
	if h.From < ans.Next && h.MaxRecords > 0 {
		recs, _, err := r.Read(h.From, ans.Next, min(h.MaxRecords, shipMaxRecords), shipMaxBytes)
		if err != nil {
			return peer.ErrorReply(asWireError(err))
		}
		if body, err = appendReplRecords(nil, recs); err != nil {
			return peer.ErrorReply(asWireError(err))
		}
	}
	out, _ := json.Marshal(ans)
	return peer.Reply{Header: out, Body: body}
}

// copyToRead decodes the header of a recovery read (repl_read,
// repl_groups_read, named typ) and returns the copy it names, refusing a
// leader older than the copy's fence.
func (s *Server) copyToRead(from peer.Peer, req peer.Request, typ string) (*core.Replica, replFence, *wire.Error) {
	var h replFence
	if err := json.Unmarshal(req.Header, &h); err != nil {
		return nil, h, wire.NewError(wire.CodeInvalidRequest, "%s header: %v", typ, err)
	}
	r, e := s.backedReplica(from.NodeID, h)
	if e != nil {
		return nil, h, e
	}
	if r.Fenced() > h.Generation {
		return nil, h, wire.NewError(wire.CodeShardUnavailable, "this copy is fenced at generation %d; %d is stale", r.Fenced(), h.Generation).
			WithDetail(wire.DetailReason, replReasonStale)
	}
	return r, h, nil
}

// backedReplica opens this broker's copy of the shard a fence or read
// names, once the view backs the call: the caller leads the shard at
// that generation and this broker is one of its followers.
func (s *Server) backedReplica(leader string, h replFence) (*core.Replica, *wire.Error) {
	ref := shardRef{kind: wire.ShardKindStream, tenant: h.TenantID, ns: h.Namespace, name: h.Stream, shard: h.Shard}
	if e := s.checkShipper(ref, leader, replAppend{Generation: h.Generation}); e != nil {
		return nil, e
	}
	k := core.StreamKey{Tenant: h.TenantID, Namespace: h.Namespace, Stream: h.Stream}
	if st, ok := s.core.Stream(k); ok && h.Incarnation != "" && st.Spec().Incarnation != "" && st.Spec().Incarnation != h.Incarnation {
		return nil, wire.NewError(wire.CodeNotFound, "stream %s here is another incarnation than the leader's %s", h.Stream, h.Incarnation).
			WithDetail(wire.DetailReason, "incarnation")
	}
	r, err := s.core.OpenStreamReplica(k, h.Shard)
	if err != nil {
		return nil, asWireError(err)
	}
	s.repl.noteFollowing(ref, h.Generation)
	return r, nil
}

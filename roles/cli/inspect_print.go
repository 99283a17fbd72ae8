package cli

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// printShardLogs prints what inspect found, as text or one JSON document.
func printShardLogs(p printer, root string, logs []shardLog) error {
	if p.json {
		return p.JSON(inspectJSON(root, logs))
	}
	if len(logs) == 0 {
		return p.Line("no stream shard, cache or counter logs under %s", root)
	}
	for i, l := range logs {
		if i > 0 {
			if err := p.Line(""); err != nil {
				return err
			}
		}
		if err := printShardLog(p, l); err != nil {
			return err
		}
	}
	return nil
}

func printShardLog(p printer, l shardLog) error {
	if err := p.Line("%s", logTitle(l)); err != nil {
		return err
	}
	if l.Kind == kindCache && l.Cache.OffsetBaseErr != nil {
		if err := p.Line("offset base: %v", l.Cache.OffsetBaseErr); err != nil {
			return err
		}
	}
	if l.Err != nil {
		return p.Line("error: %v", l.Err)
	}
	if l.Log != nil && l.Log.Absent {
		if err := p.Line("no log yet: opening creates it empty"); err != nil {
			return err
		}
	}
	r := l.Report
	rows := make([][]string, len(r.Segments))
	for i, s := range r.Segments {
		rows[i] = []string{s.File, u64(s.BaseOffset), u64(s.Records), strconv.FormatInt(s.Bytes, 10),
			yesNo(s.RecordsOK), yesNo(s.IndexOK), yesNo(s.TimeIndexOK),
			versionsText(s.Versions), kindsText(s.Kinds), generationsText(s)}
	}
	if len(rows) > 0 {
		if err := p.Table([]string{"SEGMENT", "BASE", "RECORDS", "BYTES", "RECORDS OK", "INDEX OK", "TIME INDEX OK",
			"VERSIONS", "KINDS", "GENERATIONS"}, rows); err != nil {
			return err
		}
	}
	if err := printRecords(p, l); err != nil {
		return err
	}
	if pt := r.Pending; pt != nil {
		if err := p.Line("pending truncation to offset %d, which opening finishes (deleting %d later segment files)", pt.To, len(pt.Dropped)); err != nil {
			return err
		}
	}
	if l.Kind == kindCache {
		if err := printSnapshot(p, l.Cache.Snapshot, l.refused()); err != nil {
			return err
		}
	}
	return p.Line("verdict: %s; offsets %s", logVerdictText(l), offsetRange(r))
}

// logTitle names a log: its kind, what it belongs to and its directory.
func logTitle(l shardLog) string {
	switch l.Kind {
	case kindCache, kindCounter:
		name := l.Kind + " log"
		if in := l.Cache; in.Cache != "" {
			name += " " + in.Tenant + "/" + in.Namespace + "/" + in.Cache + " " + incarnationText(in.ID)
		}
		if l.Kind == kindCache && l.Cache.HasOffsetBase {
			name += ", offset base " + u64(l.Cache.OffsetBase)
		}
		return name + " (" + l.Dir + ")"
	case kindStream:
		if l.Stream != "" {
			return "stream " + l.Tenant + "/" + l.Namespace + "/" + l.Stream + " shard " + l.Shard + " (" + l.Dir + ")"
		}
	}
	return l.Dir
}

func incarnationText(inc string) string {
	if inc == "" {
		return "(no incarnation)"
	}
	return "incarnation " + inc
}

// logVerdictText is verdictText with the store's own refusal, if any.
func logVerdictText(l shardLog) string {
	if l.Log != nil && l.Log.Refusal != "" && l.Report.Verdict != flog.VerdictRefuse {
		return "refuse: " + l.Log.Refusal + " (the log alone: " + verdictText(l.Report) + ")"
	}
	return verdictText(l.Report)
}

// printSnapshot describes a cache log's index snapshot; refused says the
// cache log is refused (the verdict says why).
func printSnapshot(p printer, s *cachelog.SnapshotInspection, refused bool) error {
	var line string
	switch {
	case !s.Present && s.Damage != nil:
		line = "index snapshot: unreadable: " + s.Damage.Error()
	case !s.Present:
		line = "index snapshot: none"
	case s.Damage != nil:
		line = fmt.Sprintf("index snapshot: %d bytes, does not verify: %v", s.Bytes, s.Damage)
	default:
		line = fmt.Sprintf("index snapshot: %d bytes, verifies; point offset %d (the records below it are reflected), %d keys", s.Bytes, s.Point, s.Entries)
	}
	switch {
	case s.Usable:
		line += "; opening loads it and replays the records from its point"
	case !s.Present && s.Damage == nil && !refused:
		line += "; opening replays the whole log"
	case s.Unusable == nil: // the log itself does not open, or no snapshot and refused
	case s.Damage == nil && refused:
		line += "; opening cannot use it (" + s.Unusable.Error() + ")"
	case s.Damage == nil:
		line += "; opening does not use it (" + s.Unusable.Error() + ") and replays the whole log"
	case !refused:
		line += "; opening does not use it and replays the whole log"
	}
	if err := p.Line("%s", line); err != nil {
		return err
	}
	if s.Leftover {
		return p.Line("a compaction a crash cut short left %s.tmp, which opening deletes", cachelog.SnapshotFile)
	}
	return nil
}

// printRecords prints the --records listing, if any.
func printRecords(p printer, l shardLog) error {
	if l.Log != nil {
		return printCacheRecords(p, l)
	}
	if len(l.Records) == 0 {
		return nil
	}
	rows := make([][]string, len(l.Records))
	for i, r := range l.Records {
		rows[i] = []string{u64(r.Offset), r.Kind.String(), strconv.Itoa(int(r.Version)), u64(r.Generation),
			microsText(r.TimeMicros), r.Publisher, strconv.Itoa(r.PayloadBytes), r.Segment, strconv.FormatInt(r.Position, 10)}
	}
	if err := p.Table([]string{"OFFSET", "KIND", "VERSION", "GENERATION", "TIME", "PUBLISHER", "PAYLOAD BYTES", "SEGMENT", "POSITION"}, rows); err != nil {
		return err
	}
	return moreRecordsLine(p, l.MoreRecords, len(l.Records))
}

// printCacheRecords prints a cache or counter log's decoded records.
func printCacheRecords(p printer, l shardLog) error {
	recs := l.Log.Records
	if len(recs) == 0 {
		return nil
	}
	header := []string{"OFFSET", "KIND", "KEY", "VALUE BYTES", "VERSION", "EXPIRES", "TIME", "SEGMENT", "POSITION"}
	if l.Kind == kindCounter {
		header = []string{"OFFSET", "KIND", "KEY", "VALUE", "TIME", "SEGMENT", "POSITION"}
	}
	rows := make([][]string, len(recs))
	for i, r := range recs {
		row := []string{u64(r.Offset), r.Kind.String(), keyText(r.Key)}
		switch {
		case r.Err != "":
			row[2] = "undecodable: " + r.Err
			row = append(row, make([]string, len(header)-6)...)
		case l.Kind == kindCounter:
			row = append(row, counterValueText(r))
		case cachelog.HoldsValue(r.Kind):
			row = append(row, strconv.Itoa(r.ValueBytes), u64(r.Version), expiryText(r.ExpiresAt))
		default:
			row = append(row, "-", "-", "-")
		}
		rows[i] = append(row, microsText(r.TimeMicros), r.Segment, strconv.FormatInt(r.Position, 10))
	}
	if err := p.Table(header, rows); err != nil {
		return err
	}
	return moreRecordsLine(p, l.Log.MoreRecords, len(recs))
}

func moreRecordsLine(p printer, more bool, n int) error {
	if more {
		return p.Line("(listing stopped after %d records; --max-records raises the bound)", n)
	}
	return nil
}

// keyText shows a key as it is when it is plain text, quoted otherwise.
func keyText(k string) string {
	if k != "" && strconv.CanBackquote(k) && !strings.ContainsAny(k, " `") {
		return k
	}
	return strconv.Quote(k)
}

// counterValueText is a counter record's value: "delta +3", "sum 12" or
// "removed".
func counterValueText(r cachelog.Record) string {
	switch r.Kind {
	case flog.KindCounterDelta:
		return "delta " + fmt.Sprintf("%+d", r.Value)
	case flog.KindCounterCheckpoint:
		return "sum " + strconv.FormatInt(r.Value, 10)
	}
	return "removed"
}

// expiryText is an absolute expiry (Unix ns), "never" for 0.
func expiryText(ns int64) string {
	if ns == 0 {
		return "never"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// versionsText is "v0:8 v1:3": records per layout version, "-" for none.
func versionsText(m map[uint8]uint64) string {
	vs := make([]int, 0, len(m))
	for v := range m {
		vs = append(vs, int(v))
	}
	sort.Ints(vs)
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = "v" + strconv.Itoa(v) + ":" + u64(m[uint8(v)])
	}
	return joinOrDash(parts)
}

// kindsText is "data:8 cache-put:1": records per kind, "-" for none.
func kindsText(m map[flog.Kind]uint64) string {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, int(k))
	}
	sort.Ints(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = flog.Kind(k).String() + ":" + u64(m[flog.Kind(k)])
	}
	return joinOrDash(parts)
}

// generationsText is the first and last record's generation ("3" when
// equal, "2..5" otherwise), "-" for an empty segment.
func generationsText(s flog.SegmentReport) string {
	switch {
	case s.Records == 0:
		return "-"
	case s.FirstGeneration == s.LastGeneration:
		return u64(s.FirstGeneration)
	}
	return u64(s.FirstGeneration) + ".." + u64(s.LastGeneration)
}

func joinOrDash(parts []string) string {
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// offsetRange describes the records that verified.
func offsetRange(r *flog.Report) string {
	if r.NextOffset == r.StartOffset {
		return "none (next " + u64(r.NextOffset) + ")"
	}
	return u64(r.StartOffset) + " to " + u64(r.NextOffset-1)
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// JSON shapes of inspect segments.
type (
	inspectDoc struct {
		Root string `json:"root"`
		// Shards are the stream shard logs, Caches the cache incarnations
		// with their cache and counter logs.
		Shards []shardLogJSON `json:"shards"`
		Caches []cacheJSON    `json:"caches"`
		// Refused counts the logs that would be refused.
		Refused int `json:"refused"`
	}
	// logJSON is what every kind of log reports.
	logJSON struct {
		Dir         string        `json:"dir"`
		Kind        string        `json:"kind"`
		Error       string        `json:"error,omitempty"`
		Verdict     string        `json:"verdict,omitempty"`
		Detail      string        `json:"detail,omitempty"`
		StartOffset uint64        `json:"start_offset"`
		NextOffset  uint64        `json:"next_offset"`
		Segments    []segmentJSON `json:"segments"`
		Truncated   *truncJSON    `json:"truncated,omitempty"`
		Corrupt     *corruptJSON  `json:"corrupt,omitempty"`
		Pending     *pendingJSON  `json:"pending_truncation,omitempty"`
	}
	shardLogJSON struct {
		logJSON
		Tenant    string `json:"tenant,omitempty"`
		Namespace string `json:"namespace,omitempty"`
		Stream    string `json:"stream,omitempty"`
		Shard     string `json:"shard"`
		// Records is the --records listing; MoreRecords says it stopped at
		// --max-records.
		Records     []logRecordJSON `json:"records,omitempty"`
		MoreRecords bool            `json:"more_records,omitempty"`
	}
	cacheJSON struct {
		Tenant      string `json:"tenant,omitempty"`
		Namespace   string `json:"namespace,omitempty"`
		Cache       string `json:"cache,omitempty"`
		Incarnation string `json:"incarnation,omitempty"`
		Dir         string `json:"dir"`
		// OffsetBase is added to log offsets to give the offsets and
		// versions clients see.
		OffsetBase      *uint64       `json:"offset_base,omitempty"`
		OffsetBaseError string        `json:"offset_base_error,omitempty"`
		CacheLog        *storeLogJSON `json:"cache_log,omitempty"`
		Snapshot        *snapshotJSON `json:"snapshot,omitempty"`
		CounterLog      *storeLogJSON `json:"counter_log,omitempty"`
	}
	// storeLogJSON is a cache or counter log.
	storeLogJSON struct {
		logJSON
		// Absent says the log's directory does not exist yet (opening
		// creates it). Refusal is why the broker would refuse the store
		// although the log opens; Undecodable counts the records that do
		// not decode.
		Absent      bool              `json:"absent,omitempty"`
		Refusal     string            `json:"refusal,omitempty"`
		Undecodable uint64            `json:"undecodable,omitempty"`
		Records     []cacheRecordJSON `json:"records,omitempty"`
		MoreRecords bool              `json:"more_records,omitempty"`
	}
	cacheRecordJSON struct {
		Offset   uint64 `json:"offset"`
		Kind     string `json:"kind"`
		KindCode uint8  `json:"kind_code"`
		Key      string `json:"key"`
		// ValueBytes, Version (as clients see it) and ExpiresAt (empty:
		// never) are a cache put's or copy's.
		ValueBytes *int    `json:"value_bytes,omitempty"`
		Version    *uint64 `json:"version,omitempty"`
		ExpiresAt  string  `json:"expires_at,omitempty"`
		// Delta and Sum are a counter delta's and checkpoint's.
		Delta    *int64 `json:"delta,omitempty"`
		Sum      *int64 `json:"sum,omitempty"`
		Error    string `json:"error,omitempty"`
		Time     string `json:"time,omitempty"`
		Segment  string `json:"segment"`
		Position int64  `json:"position"`
	}
	snapshotJSON struct {
		Present  bool   `json:"present"`
		Bytes    int64  `json:"bytes,omitempty"`
		Verifies bool   `json:"verifies"`
		Damage   string `json:"damage,omitempty"`
		Point    uint64 `json:"point,omitempty"`
		Keys     int    `json:"keys,omitempty"`
		Usable   bool   `json:"usable"`
		Unusable string `json:"unusable,omitempty"`
		Leftover bool   `json:"leftover_tmp,omitempty"`
	}
	pendingJSON struct {
		To      uint64   `json:"to"`
		Dropped []string `json:"dropped"`
	}
	logRecordJSON struct {
		Offset       uint64 `json:"offset"`
		Kind         string `json:"kind"`
		KindCode     uint8  `json:"kind_code"`
		Version      uint8  `json:"version"`
		Generation   uint64 `json:"generation"`
		Time         string `json:"time,omitempty"`
		Publisher    string `json:"publisher,omitempty"`
		PayloadBytes int    `json:"payload_bytes"`
		Segment      string `json:"segment"`
		Position     int64  `json:"position"`
		// Producer is the producer block of an idempotent batch's first
		// record (layout version 2).
		Producer *producerJSON `json:"producer,omitempty"`
		// StateBytes is the length of an atomic commit's state section
		// (layout version 3); absent on other records.
		StateBytes int `json:"state_bytes,omitempty"`
	}
	producerJSON struct {
		ID       uint64 `json:"id"`
		Sequence uint64 `json:"sequence"`
		Count    uint32 `json:"count"`
	}
	segmentJSON struct {
		File        string `json:"file"`
		BaseOffset  uint64 `json:"base_offset"`
		Records     uint64 `json:"records"`
		Bytes       int64  `json:"bytes"`
		RecordsOK   bool   `json:"records_ok"`
		IndexOK     bool   `json:"index_ok"`
		TimeIndexOK bool   `json:"time_index_ok"`
		FirstTime   string `json:"first_time,omitempty"`
		LastTime    string `json:"last_time,omitempty"`
		// Versions counts records per layout version ("0", "1"); Kinds per
		// kind name.
		Versions        map[string]uint64 `json:"versions"`
		Kinds           map[string]uint64 `json:"kinds"`
		FirstGeneration uint64            `json:"first_generation"`
		LastGeneration  uint64            `json:"last_generation"`
	}
	truncJSON struct {
		Segment  string `json:"segment"`
		Position int64  `json:"position"`
		Bytes    int64  `json:"bytes"`
		Reason   string `json:"reason"`
	}
	corruptJSON struct {
		Segment        string  `json:"segment"`
		Position       int64   `json:"position"`
		Reason         string  `json:"reason"`
		LastGoodOffset *uint64 `json:"last_good_offset,omitempty"`
	}
)

func inspectJSON(root string, logs []shardLog) inspectDoc {
	doc := inspectDoc{Root: root, Shards: []shardLogJSON{}, Caches: []cacheJSON{}}
	for _, l := range logs {
		if l.refused() {
			doc.Refused++
		}
		if l.Kind == kindStream {
			doc.Shards = append(doc.Shards, streamJSON(l))
			continue
		}
		// An incarnation's logs come one after the other.
		if n := len(doc.Caches); n == 0 || doc.Caches[n-1].Dir != l.Cache.Dir {
			doc.Caches = append(doc.Caches, incarnationJSON(l.Cache))
		}
		c := &doc.Caches[len(doc.Caches)-1]
		j := &storeLogJSON{logJSON: commonLogJSON(l), Absent: l.Log.Absent, Refusal: l.Log.Refusal, Undecodable: l.Log.Undecodable, MoreRecords: l.Log.MoreRecords}
		for _, r := range l.Log.Records {
			j.Records = append(j.Records, storeRecordJSON(r))
		}
		if l.Kind == kindCounter {
			c.CounterLog = j
			continue
		}
		c.CacheLog, c.Snapshot = j, snapshotDoc(l.Cache.Snapshot)
	}
	return doc
}

// commonLogJSON is what every kind of log reports.
func commonLogJSON(l shardLog) logJSON {
	j := logJSON{Dir: l.Dir, Kind: l.Kind, Segments: []segmentJSON{}}
	if l.Err != nil {
		j.Error = l.Err.Error()
		return j
	}
	r := l.Report
	j.Verdict, j.Detail = r.Verdict.String(), logVerdictText(l)
	if l.refused() {
		j.Verdict = flog.VerdictRefuse.String()
	}
	j.StartOffset, j.NextOffset = r.StartOffset, r.NextOffset
	if t := r.Truncated; t != nil {
		j.Truncated = &truncJSON{Segment: t.Segment, Position: t.Position, Bytes: t.Bytes, Reason: t.Reason}
	}
	for _, s := range r.Segments {
		j.Segments = append(j.Segments, segmentJSON{File: s.File, BaseOffset: s.BaseOffset, Records: s.Records,
			Bytes: s.Bytes, RecordsOK: s.RecordsOK, IndexOK: s.IndexOK, TimeIndexOK: s.TimeIndexOK,
			FirstTime: microsText(s.FirstTime), LastTime: microsText(s.LastTime),
			Versions: versionsJSON(s.Versions), Kinds: kindsJSON(s.Kinds),
			FirstGeneration: s.FirstGeneration, LastGeneration: s.LastGeneration})
	}
	if pt := r.Pending; pt != nil {
		j.Pending = &pendingJSON{To: pt.To, Dropped: append([]string{}, pt.Dropped...)}
	}
	if c := r.Corrupt; c != nil {
		j.Corrupt = &corruptJSON{Segment: c.Segment, Position: c.Position, Reason: c.Reason}
		if c.HasLastGood {
			j.Corrupt.LastGoodOffset = &c.LastGoodOffset
		}
	}
	return j
}

func streamJSON(l shardLog) shardLogJSON {
	j := shardLogJSON{logJSON: commonLogJSON(l), Tenant: l.Tenant, Namespace: l.Namespace, Stream: l.Stream, Shard: l.Shard,
		MoreRecords: l.MoreRecords}
	for _, rec := range l.Records {
		r := logRecordJSON{Offset: rec.Offset, Kind: rec.Kind.String(), KindCode: uint8(rec.Kind),
			Version: rec.Version, Generation: rec.Generation, Time: microsText(rec.TimeMicros), Publisher: rec.Publisher,
			PayloadBytes: rec.PayloadBytes, Segment: rec.Segment, Position: rec.Position, StateBytes: rec.StateBytes}
		if pr := rec.Producer; pr != nil {
			r.Producer = &producerJSON{ID: pr.ID, Sequence: pr.Sequence, Count: pr.Count}
		}
		j.Records = append(j.Records, r)
	}
	return j
}

func incarnationJSON(in *cachelog.Inspection) cacheJSON {
	c := cacheJSON{Tenant: in.Tenant, Namespace: in.Namespace, Cache: in.Cache, Incarnation: in.ID, Dir: in.Dir}
	if in.HasOffsetBase && in.OffsetBaseErr == nil {
		c.OffsetBase = &in.OffsetBase
	}
	if in.OffsetBaseErr != nil {
		c.OffsetBaseError = in.OffsetBaseErr.Error()
	}
	return c
}

func storeRecordJSON(r cachelog.Record) cacheRecordJSON {
	j := cacheRecordJSON{Offset: r.Offset, Kind: r.Kind.String(), KindCode: uint8(r.Kind), Key: r.Key, Error: r.Err,
		Time: microsText(r.TimeMicros), Segment: r.Segment, Position: r.Position}
	switch {
	case r.Err != "":
	case cachelog.HoldsValue(r.Kind):
		j.ValueBytes, j.Version = &r.ValueBytes, &r.Version
		if r.ExpiresAt != 0 {
			j.ExpiresAt = expiryText(r.ExpiresAt)
		}
	case r.Kind == flog.KindCounterDelta:
		j.Delta = &r.Value
	case r.Kind == flog.KindCounterCheckpoint:
		j.Sum = &r.Value
	}
	return j
}

func snapshotDoc(s *cachelog.SnapshotInspection) *snapshotJSON {
	j := &snapshotJSON{Present: s.Present, Bytes: s.Bytes, Verifies: s.Present && s.Damage == nil, Usable: s.Usable, Leftover: s.Leftover}
	if s.Damage != nil {
		j.Damage = s.Damage.Error()
	}
	if j.Verifies {
		j.Point, j.Keys = s.Point, s.Entries
	}
	if s.Unusable != nil {
		j.Unusable = s.Unusable.Error()
	}
	return j
}

// microsText formats a record time; "" for none.
func microsText(us uint64) string {
	if us == 0 {
		return ""
	}
	return time.UnixMicro(int64(us)).UTC().Format(time.RFC3339Nano)
}

func versionsJSON(m map[uint8]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for v, n := range m {
		out[strconv.Itoa(int(v))] = n
	}
	return out
}

func kindsJSON(m map[flog.Kind]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, n := range m {
		out[k.String()] = n
	}
	return out
}

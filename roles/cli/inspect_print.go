package cli

import (
	"sort"
	"strconv"
	"strings"
	"time"

	flog "github.com/felixmq/felix/log"
)

// printShardLogs prints what inspect found, as text or one JSON document.
func printShardLogs(p printer, root string, logs []shardLog) error {
	if p.json {
		return p.JSON(inspectJSON(root, logs))
	}
	if len(logs) == 0 {
		return p.Line("no shard logs under %s", root)
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
	title := l.Dir
	if l.Stream != "" {
		title = l.Tenant + "/" + l.Namespace + "/" + l.Stream + " shard " + l.Shard + " (" + l.Dir + ")"
	}
	if err := p.Line("%s", title); err != nil {
		return err
	}
	if l.Err != nil {
		return p.Line("error: %v", l.Err)
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
	return p.Line("verdict: %s; offsets %s", verdictText(r), offsetRange(r))
}

// printRecords prints the --records listing, if any.
func printRecords(p printer, l shardLog) error {
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
	if l.MoreRecords {
		return p.Line("(listing stopped after %d records; --max-records raises the bound)", len(l.Records))
	}
	return nil
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
		Root    string         `json:"root"`
		Shards  []shardLogJSON `json:"shards"`
		Refused int            `json:"refused"`
	}
	shardLogJSON struct {
		Dir         string        `json:"dir"`
		Tenant      string        `json:"tenant,omitempty"`
		Namespace   string        `json:"namespace,omitempty"`
		Stream      string        `json:"stream,omitempty"`
		Shard       string        `json:"shard"`
		Error       string        `json:"error,omitempty"`
		Verdict     string        `json:"verdict,omitempty"`
		Detail      string        `json:"detail,omitempty"`
		StartOffset uint64        `json:"start_offset"`
		NextOffset  uint64        `json:"next_offset"`
		Segments    []segmentJSON `json:"segments"`
		Truncated   *truncJSON    `json:"truncated,omitempty"`
		Corrupt     *corruptJSON  `json:"corrupt,omitempty"`
		Pending     *pendingJSON  `json:"pending_truncation,omitempty"`
		// Records is the --records listing; MoreRecords says it stopped at
		// --max-records.
		Records     []logRecordJSON `json:"records,omitempty"`
		MoreRecords bool            `json:"more_records,omitempty"`
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
	doc := inspectDoc{Root: root, Shards: make([]shardLogJSON, 0, len(logs))}
	for _, l := range logs {
		j := shardLogJSON{Dir: l.Dir, Tenant: l.Tenant, Namespace: l.Namespace, Stream: l.Stream, Shard: l.Shard,
			Segments: []segmentJSON{}}
		if l.Err != nil {
			j.Error = l.Err.Error()
			doc.Shards = append(doc.Shards, j)
			continue
		}
		r := l.Report
		j.Verdict, j.Detail = r.Verdict.String(), verdictText(r)
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
		for _, rec := range l.Records {
			j.Records = append(j.Records, logRecordJSON{Offset: rec.Offset, Kind: rec.Kind.String(), KindCode: uint8(rec.Kind),
				Version: rec.Version, Generation: rec.Generation, Time: microsText(rec.TimeMicros), Publisher: rec.Publisher,
				PayloadBytes: rec.PayloadBytes, Segment: rec.Segment, Position: rec.Position})
		}
		j.MoreRecords = l.MoreRecords
		if c := r.Corrupt; c != nil {
			j.Corrupt = &corruptJSON{Segment: c.Segment, Position: c.Position, Reason: c.Reason}
			if c.HasLastGood {
				j.Corrupt.LastGoodOffset = &c.LastGoodOffset
			}
		}
		if r.Verdict == flog.VerdictRefuse {
			doc.Refused++
		}
		doc.Shards = append(doc.Shards, j)
	}
	return doc
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

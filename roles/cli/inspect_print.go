package cli

import (
	"strconv"
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
			yesNo(s.RecordsOK), yesNo(s.IndexOK), yesNo(s.TimeIndexOK)}
	}
	if len(rows) > 0 {
		if err := p.Table([]string{"SEGMENT", "BASE", "RECORDS", "BYTES", "RECORDS OK", "INDEX OK", "TIME INDEX OK"}, rows); err != nil {
			return err
		}
	}
	return p.Line("verdict: %s; offsets %s", verdictText(r), offsetRange(r))
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
				FirstTime: microsText(s.FirstTime), LastTime: microsText(s.LastTime)})
		}
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

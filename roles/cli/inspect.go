package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// exitRefused is inspect's exit status when some log would be refused.
const exitRefused = 2

func inspectCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "inspect",
		Usage:     "look at a broker's files without a broker",
		UsageText: "felix inspect segments [--data-dir DIR | --storage-dir DIR | --dir LOG_DIR] [--kind stream|cache|counter] [-o json]",
		Description: "Reads what a broker stored, without starting one or changing any file. Example:\n\n" +
			"   felix inspect segments --data-dir ./felix-data",
		Subcommands: []*cli.Command{inspectSegmentsCommand()},
	})
}

func inspectSegmentsCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "segments",
		Usage:     "check every durable stream shard log, cache log and counter log and say whether a broker would open it",
		UsageText: "felix inspect segments [--data-dir DIR] [--storage-dir DIR] [--dir LOG_DIR] [--kind stream|cache|counter] [--records [--max-records N]] [-o json]",
		Description: "Runs the broker's log recovery read-only over every log under the durable storage\n" +
			"directory STORAGE (--storage-dir, by default DATA_DIR/log): the stream shard logs in\n" +
			"STORAGE/streams/TENANT/NAMESPACE/STREAM/SHARD, and, for every incarnation of a log-backed\n" +
			"cache in STORAGE/caches/TENANT/NAMESPACE/CACHE/INCARNATION, its cache log (log/, with its\n" +
			"index snapshot index.snap) and its counter log (counters/log/). --kind keeps one kind;\n" +
			"--dir names one directory instead: a stream shard log, a cache incarnation, or its\n" +
			"counters directory. For each log it prints each segment file (base offset, records that\n" +
			"verified, bytes, whether the records, the offset index and the time index are sound, the\n" +
			"records per layout version and per kind, and the first and last record's generation) and\n" +
			"the verdict: open, truncate torn tail (a partial last record that opening would cut), or\n" +
			"refuse (damage before the tail, which needs an operator). A cache or counter log is also\n" +
			"refused when a record does not decode, and a cache log when its index snapshot is unusable\n" +
			"and the log no longer starts at 0; the snapshot is shown (present, whether its CRC\n" +
			"verifies, its point offset, its keys, whether opening loads it). Index files that are not\n" +
			"ok are rebuilt on open; a truncation a crash interrupted is finished on open and shown as\n" +
			"pending. With --records it also lists every record opening would keep (at most\n" +
			"--max-records per log): offset, kind and time, and for a stream the layout version,\n" +
			"generation, publisher and payload size; for a cache the key, value size, version (as\n" +
			"clients see it) and expiry; for a counter the key and delta or checkpoint sum. Nothing is\n" +
			"written.\n" +
			"Exit status: 0 when every log would open (with or without cutting a torn tail), 2 when\n" +
			"any would be refused, 1 when the files cannot be read. Examples:\n\n" +
			"   felix inspect segments --data-dir ./felix-data\n" +
			"   felix inspect segments --data-dir ./felix-data --kind cache --records\n" +
			"   felix inspect segments --dir ./felix-data/log/streams/default/default/events/0 -o json",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: flagDataDir, EnvVars: []string{"FELIX_DATA_DIR"}, Value: defaultDataDir,
				Usage: "the broker's data `DIR`"},
			&cli.StringFlag{Name: "storage-dir", EnvVars: []string{"FELIX_DURABLE_STORAGE_DIR"},
				Usage: "durable storage `DIR`", DefaultText: "DATA_DIR/log"},
			&cli.StringFlag{Name: "dir", Usage: "inspect only this `DIR`: a stream shard log, a cache incarnation or its counters directory"},
			&cli.StringFlag{Name: "kind", Usage: "inspect only logs of this `KIND`: stream, cache (with its index snapshot) or counter"},
			&cli.BoolFlag{Name: "records", Usage: "also list each record: offset, kind and what it holds"},
			&cli.IntFlag{Name: "max-records", Value: defaultMaxRecords,
				Usage: "with --records, list at most `N` records per log (0: all)"},
			OutputFlag(),
		},
		Action: runInspectSegments,
	})
}

// defaultMaxRecords bounds --records per log unless --max-records says
// otherwise.
const defaultMaxRecords = 1000

// The kinds of log inspect reads (--kind).
const (
	kindStream  = "stream"
	kindCache   = "cache"
	kindCounter = "counter"
)

// shardLog is one log directory (a stream shard's, a cache's or a
// counter log) and what inspecting it found.
type shardLog struct {
	Kind                      string // kindStream, kindCache or kindCounter
	Dir                       string
	Tenant, Namespace, Stream string // empty for --dir
	Shard                     string
	Report                    *flog.Report
	Err                       error // Inspect failed (nil Report)
	// Records are a stream's records listed with --records; MoreRecords
	// says the listing stopped at --max-records.
	Records     []flog.RecordInfo
	MoreRecords bool
	// Cache is a cache or counter log's incarnation (its names, offset
	// base and index snapshot); Log is what cachelog found in this log:
	// its decoded records and why the store would refuse it.
	Cache *cachelog.Inspection
	Log   *cachelog.LogInspection
}

// refused reports whether opening the log (or the store on it) would
// fail.
func (l *shardLog) refused() bool {
	if l.Log != nil {
		return l.Log.Refused()
	}
	return l.Err == nil && l.Report.Verdict == flog.VerdictRefuse
}

// errEnoughRecords stops a record scan at --max-records.
var errEnoughRecords = errors.New("enough records")

func runInspectSegments(c *cli.Context) error {
	if err := needArgs(c, 0, 0); err != nil {
		return err
	}
	p, err := newPrinter(c)
	if err != nil {
		return err
	}
	kinds, err := inspectKinds(c)
	if err != nil {
		return err
	}
	if c.Int("max-records") < 0 {
		return usageErrorf(c, "--max-records %d is negative", c.Int("max-records"))
	}
	found, err := findLogs(c, kinds)
	if err != nil {
		return exitError(err)
	}
	logs := found.streams
	for i := range logs {
		if c.Bool("records") {
			logs[i].inspectRecords(c.Int("max-records"))
			continue
		}
		logs[i].Report, logs[i].Err = inspectOne(logs[i].Dir)
	}
	o := cachelog.InspectOptions{Cache: kinds[kindCache], Counters: kinds[kindCounter], Records: c.Bool("records"), MaxRecords: c.Int("max-records")}
	for _, inc := range found.caches {
		logs = append(logs, cacheLogs(cachelog.Inspect(inc, o))...)
	}
	if err := printShardLogs(p, found.root, logs); err != nil {
		return exitError(err)
	}
	return inspectStatus(logs)
}

// inspectKinds reads --kind: every kind when it is not given.
func inspectKinds(c *cli.Context) (map[string]bool, error) {
	switch k := c.String("kind"); k {
	case "":
		return map[string]bool{kindStream: true, kindCache: true, kindCounter: true}, nil
	case kindStream, kindCache, kindCounter:
		return map[string]bool{k: true}, nil
	default:
		return nil, usageErrorf(c, "--kind %q is not a kind of log: use stream, cache or counter", k)
	}
}

// cacheLogs lists an inspected incarnation's logs.
func cacheLogs(in *cachelog.Inspection) []shardLog {
	var out []shardLog
	for _, l := range []struct {
		kind string
		log  *cachelog.LogInspection
	}{{kindCache, in.CacheLog}, {kindCounter, in.CounterLog}} {
		if l.log == nil {
			continue
		}
		out = append(out, shardLog{Kind: l.kind, Dir: l.log.Dir, Tenant: in.Tenant, Namespace: in.Namespace,
			Report: l.log.Report, Err: l.log.Err, Cache: in, Log: l.log})
	}
	return out
}

// inspectOne runs Inspect, turning a refusal reported as an error into a
// refusing report.
func inspectOne(dir string) (*flog.Report, error) {
	rep, err := flog.Inspect(dir)
	var ce *flog.CorruptionError
	if err != nil && errors.As(err, &ce) {
		return &flog.Report{Dir: dir, Verdict: flog.VerdictRefuse, Corrupt: ce}, nil
	}
	return rep, err
}

// inspectRecords is inspectOne that also lists up to max records (0: all).
func (l *shardLog) inspectRecords(max int) {
	rep, err := flog.ScanRecords(l.Dir, func(r flog.RecordInfo) error {
		if max > 0 && len(l.Records) == max {
			l.MoreRecords = true
			return errEnoughRecords
		}
		r.Payload = nil // the scan's buffer: not kept
		l.Records = append(l.Records, r)
		return nil
	})
	if errors.Is(err, errEnoughRecords) {
		err = nil
	}
	l.Report, l.Err = rep, err
	if err != nil {
		l.Report = nil
	}
}

// inspectStatus is the exit status: refused beats unreadable beats fine.
func inspectStatus(logs []shardLog) error {
	refused, failed := 0, 0
	for _, l := range logs {
		switch {
		case l.Err != nil:
			failed++
		case l.refused():
			refused++
		}
	}
	switch {
	case refused > 0:
		return cli.Exit(fmt.Sprintf("error: %d of %d logs would be refused", refused, len(logs)), exitRefused)
	case failed > 0:
		return cli.Exit(fmt.Sprintf("error: %d of %d logs could not be read", failed, len(logs)), exitGeneric)
	}
	return nil
}

// foundLogs is what findLogs found: the stream shard logs, the cache
// incarnations, and the directory they were found under.
type foundLogs struct {
	streams []shardLog
	caches  []cachelog.Incarnation
	root    string
}

// findLogs lists the logs to inspect: those of the kinds asked for under
// the storage directory, or the one directory --dir names.
func findLogs(c *cli.Context, kinds map[string]bool) (foundLogs, error) {
	if dir := c.String("dir"); dir != "" {
		return findInDir(dir, kinds)
	}
	storage := c.String("storage-dir")
	if storage == "" {
		storage = filepath.Join(c.String(flagDataDir), "log")
	}
	found := foundLogs{root: storage}
	if _, err := os.Stat(storage); err != nil {
		return found, fmt.Errorf("no durable storage at %s: %w", storage, err)
	}
	var err error
	if kinds[kindStream] {
		found.streams, err = walkShardLogs(filepath.Join(storage, "streams"))
	}
	if kinds[kindCache] || kinds[kindCounter] {
		incs, e := cachelog.FindIncarnations(storage)
		found.caches, err = incs, errors.Join(err, e)
	}
	return found, err
}

// findInDir is findLogs for --dir: a cache incarnation (it holds log/),
// an incarnation's counters directory, or else one stream shard log.
func findInDir(dir string, kinds map[string]bool) (foundLogs, error) {
	found := foundLogs{root: dir}
	if _, err := os.Stat(dir); err != nil {
		return found, err
	}
	st, err := os.Stat(filepath.Join(dir, cachelog.LogDir))
	switch {
	case err != nil || !st.IsDir():
		if kinds[kindStream] {
			found.streams = []shardLog{{Kind: kindStream, Dir: dir, Shard: filepath.Base(dir)}}
		}
	case filepath.Base(dir) == cachelog.CounterDir:
		// The counters directory of an incarnation: its counter log, and
		// not the incarnation's cache log (the caller's options follow
		// kinds).
		if kinds[kindCounter] {
			found.caches = []cachelog.Incarnation{cachelog.IncarnationAt(filepath.Dir(dir))}
			kinds[kindCache] = false
		}
	default:
		found.caches = []cachelog.Incarnation{cachelog.IncarnationAt(dir)}
	}
	return found, nil
}

// walkShardLogs finds root/TENANT/NAMESPACE/STREAM/SHARD directories, in
// name order. A missing root (no durable stream yet) is no logs.
func walkShardLogs(root string) ([]shardLog, error) {
	paths, err := cachelog.WalkLevels(root, 4)
	logs := make([]shardLog, 0, len(paths))
	for _, p := range paths {
		logs = append(logs, shardLog{Kind: kindStream, Dir: filepath.Join(root, filepath.Join(p...)), Tenant: p[0], Namespace: p[1], Stream: p[2], Shard: p[3]})
	}
	return logs, err
}

// verdictText says what opening the log would do.
func verdictText(r *flog.Report) string {
	switch {
	case r.Verdict == flog.VerdictRefuse && r.Corrupt != nil:
		return "refuse: " + corruptText(r.Corrupt)
	case r.Verdict == flog.VerdictTruncate && r.Truncated != nil:
		t := r.Truncated
		return fmt.Sprintf("truncate torn tail at %s position %d (%d bytes: %s)", t.Segment, t.Position, t.Bytes, t.Reason)
	}
	return r.Verdict.String()
}

func corruptText(e *flog.CorruptionError) string {
	s := fmt.Sprintf("segment %s position %d: %s", e.Segment, e.Position, e.Reason)
	if e.HasLastGood {
		s += " (last good offset " + strconv.FormatUint(e.LastGoodOffset, 10) + ")"
	}
	return s
}

package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/urfave/cli/v2"

	flog "github.com/felixmq/felix/log"
)

// exitRefused is inspect's exit status when some log would be refused.
const exitRefused = 2

func inspectCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "inspect",
		Usage:     "look at a broker's files without a broker",
		UsageText: "felix inspect segments [--data-dir DIR | --storage-dir DIR | --dir SHARD_DIR] [-o json]",
		Description: "Reads what a broker stored, without starting one or changing any file. Example:\n\n" +
			"   felix inspect segments --data-dir ./felix-data",
		Subcommands: []*cli.Command{inspectSegmentsCommand()},
	})
}

func inspectSegmentsCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "segments",
		Usage:     "check every durable stream shard's segment log and say whether a broker would open it",
		UsageText: "felix inspect segments [--data-dir DIR] [--storage-dir DIR] [--dir SHARD_DIR] [--records [--max-records N]] [-o json]",
		Description: "Runs the broker's log recovery read-only over every shard log under\n" +
			"STORAGE/streams/TENANT/NAMESPACE/STREAM/SHARD (STORAGE is --storage-dir, by default\n" +
			"DATA_DIR/log), or over the one shard directory --dir names, and prints each segment file\n" +
			"(base offset, records that verified, bytes, whether the records, the offset index and the\n" +
			"time index are sound, the records per layout version and per kind, and the first and last\n" +
			"record's generation) and the verdict: open, truncate torn tail (a partial last record that\n" +
			"opening would cut), or refuse (damage before the tail, which needs an operator). Index\n" +
			"files that are not ok are rebuilt on open; a truncation a crash interrupted is finished on\n" +
			"open and shown as pending. With --records it also lists every record opening would keep:\n" +
			"offset, kind, layout version, generation, time, publisher and payload size (at most\n" +
			"--max-records per shard). Nothing is written.\n" +
			"Exit status: 0 when every shard would open (with or without cutting a torn tail), 2 when\n" +
			"any would be refused, 1 when the files cannot be read. Examples:\n\n" +
			"   felix inspect segments --data-dir ./felix-data\n" +
			"   felix inspect segments --dir ./felix-data/log/streams/default/default/events/0 -o json",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: flagDataDir, EnvVars: []string{"FELIX_DATA_DIR"}, Value: defaultDataDir,
				Usage: "the broker's data `DIR`"},
			&cli.StringFlag{Name: "storage-dir", EnvVars: []string{"FELIX_DURABLE_STORAGE_DIR"},
				Usage: "durable storage `DIR`", DefaultText: "DATA_DIR/log"},
			&cli.StringFlag{Name: "dir", Usage: "inspect only this one shard log `DIR`"},
			&cli.BoolFlag{Name: "records", Usage: "also list each record's offset, kind, version and generation"},
			&cli.IntFlag{Name: "max-records", Value: defaultMaxRecords,
				Usage: "with --records, list at most `N` records per shard log (0: all)"},
			OutputFlag(),
		},
		Action: runInspectSegments,
	})
}

// defaultMaxRecords bounds --records per shard log unless --max-records
// says otherwise.
const defaultMaxRecords = 1000

// shardLog is one shard log directory and what Inspect found in it.
type shardLog struct {
	Dir                       string
	Tenant, Namespace, Stream string // empty for --dir
	Shard                     string
	Report                    *flog.Report
	Err                       error // Inspect failed (nil Report)
	// Records are the records listed with --records; MoreRecords says the
	// listing stopped at --max-records.
	Records     []flog.RecordInfo
	MoreRecords bool
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
	logs, root, err := findShardLogs(c)
	if err != nil {
		return exitError(err)
	}
	if c.Int("max-records") < 0 {
		return usageErrorf(c, "--max-records %d is negative", c.Int("max-records"))
	}
	for i := range logs {
		if c.Bool("records") {
			logs[i].inspectRecords(c.Int("max-records"))
			continue
		}
		logs[i].Report, logs[i].Err = inspectOne(logs[i].Dir)
	}
	if err := printShardLogs(p, root, logs); err != nil {
		return exitError(err)
	}
	return inspectStatus(logs)
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
		case l.Report.Verdict == flog.VerdictRefuse:
			refused++
		}
	}
	switch {
	case refused > 0:
		return cli.Exit(fmt.Sprintf("error: %d of %d shard logs would be refused", refused, len(logs)), exitRefused)
	case failed > 0:
		return cli.Exit(fmt.Sprintf("error: %d of %d shard logs could not be read", failed, len(logs)), exitGeneric)
	}
	return nil
}

// findShardLogs lists the shard directories to inspect and the root they
// were found under.
func findShardLogs(c *cli.Context) ([]shardLog, string, error) {
	if dir := c.String("dir"); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, dir, err
		}
		return []shardLog{{Dir: dir, Shard: filepath.Base(dir)}}, dir, nil
	}
	storage := c.String("storage-dir")
	if storage == "" {
		storage = filepath.Join(c.String(flagDataDir), "log")
	}
	root := filepath.Join(storage, "streams")
	if _, err := os.Stat(storage); err != nil {
		return nil, root, fmt.Errorf("no durable storage at %s: %w", storage, err)
	}
	logs, err := walkShardLogs(root)
	return logs, root, err
}

// walkShardLogs finds root/TENANT/NAMESPACE/STREAM/SHARD directories, in
// name order. A missing root (no durable stream yet) is no logs.
func walkShardLogs(root string) ([]shardLog, error) {
	var logs []shardLog
	tenants, err := subdirs(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	for _, t := range tenants {
		nss, e1 := subdirs(filepath.Join(root, t))
		err = errors.Join(err, e1)
		for _, ns := range nss {
			streams, e2 := subdirs(filepath.Join(root, t, ns))
			err = errors.Join(err, e2)
			for _, s := range streams {
				shards, e3 := subdirs(filepath.Join(root, t, ns, s))
				err = errors.Join(err, e3)
				for _, sh := range shards {
					logs = append(logs, shardLog{Dir: filepath.Join(root, t, ns, s, sh), Tenant: t, Namespace: ns, Stream: s, Shard: sh})
				}
			}
		}
	}
	return logs, err
}

// subdirs returns the names of dir's subdirectories, sorted.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
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

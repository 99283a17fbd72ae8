package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		var err error
		switch os.Args[1] {
		case "serve-nats":
			err = serveNATS(os.Args[2:])
		case "serve-etcd":
			err = serveEtcd(os.Args[2:])
		default:
			os.Exit(run(os.Args[1:]))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run(nil))
}

// options are the harness's flags.
type options struct {
	workloads       []string
	rounds, warmup  int
	smoke           bool
	jsonPath        string
	writeDocs       bool
	docsPath        string
	docsFrom        string
	repo            string
	duration        time.Duration
	pubsubDuration  time.Duration
	fanoutMaxStep   time.Duration
	fanoutNs        []int
	fanoutRate      int
	subs            int
	watchNs         []int
	watchDuration   time.Duration
	metaConcurrency int
	casCallers      int
	failoverKills   int           // SIGKILLs per round and transport in the failover workload
	failoverCall    time.Duration // the failover workload's bound on each publish
	timeout         time.Duration
	// transports are the Felix transports each case runs over, in
	// order, each its own run in every round: quic, tcp or both.
	transports []string
}

// Felix transports the harness knows, in the order a round runs them.
const (
	transportQUIC = "quic"
	transportTCP  = "tcp"
)

var allTransports = []string{transportQUIC, transportTCP}

// parseTransports reads a comma-separated transport list; the result keeps
// the order of allTransports and holds each transport once.
func parseTransports(s string) ([]string, error) {
	want := map[string]bool{}
	for _, t := range strings.Split(s, ",") {
		t = strings.ToLower(strings.TrimSpace(t))
		if !slices.Contains(allTransports, t) {
			return nil, fmt.Errorf("--transports: unknown transport %q (have %s)", t, strings.Join(allTransports, ","))
		}
		want[t] = true
	}
	var out []string
	for _, t := range allTransports {
		if want[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var names, all []string // every workload; those "all" runs
	for _, w := range allWorkloads() {
		names = append(names, w.name)
		if w.onlyNamed == "" {
			all = append(all, w.name)
		}
	}
	workloads := fs.String("workloads", "all", "comma-separated workloads: "+strings.Join(names, ",")+
		" (all: every one but those run only when named: "+strings.Join(onlyNamed(), ",")+")")
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds after the warm-up (at least 1)")
	fs.IntVar(&o.warmup, "warmup", 1, "warm-up rounds, not counted")
	fs.BoolVar(&o.smoke, "smoke", false, "one short round of pubsub-4k and fanout N=10 (~30 s); exits non-zero if a figure is missing")
	fs.StringVar(&o.jsonPath, "json", "results/latest.json", "write the results as JSON to `FILE`")
	fs.BoolVar(&o.writeDocs, "write-docs", false, "regenerate the marked section of the docs file")
	fs.StringVar(&o.docsPath, "docs", "", "docs file for --write-docs (default <repo>/docs/benchmarks.md)")
	fs.StringVar(&o.docsFrom, "docs-from", "", "run nothing: write the docs section from the results JSON `FILE` of an earlier run")
	fs.StringVar(&o.repo, "repo", "../..", "the Felix checkout (built unless FELIX_BIN is set)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "load duration of each run, except pubsub-4k")
	fs.DurationVar(&o.pubsubDuration, "pubsub-duration", 10*time.Second, "load duration of each pubsub-4k run")
	fs.DurationVar(&o.fanoutMaxStep, "fanout-max-step", time.Second, "length of each fanout-max search step")
	fanoutNs := fs.String("fanout-n", "10,100,1000", "fanout subscriber counts")
	fs.IntVar(&o.fanoutRate, "fanout-rate", 0, "fanout offered rate in msgs/s (default min(1000, 50000/N))")
	fs.IntVar(&o.subs, "subs", 10000, "idle subscriptions for sub-memory")
	watchNs := fs.String("watch-n", "100,1000,10000", "watch-fanout watcher counts")
	fs.DurationVar(&o.watchDuration, "watch-duration", 10*time.Second, "updates of each watch-fanout run (bounded to 1 minute)")
	fs.IntVar(&o.metaConcurrency, "meta-concurrency", 16, "concurrent callers for meta")
	fs.IntVar(&o.casCallers, "cas-callers", 16, "callers updating the one key in cache-cas")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Minute, "stop everything after this long")
	kills := fs.String("failover-kills", cmp.Or(os.Getenv("BENCH_FAILOVER_KILLS"), strconv.Itoa(failoverKillsDefault)),
		"leader SIGKILLs per round and transport in the failover workload (env BENCH_FAILOVER_KILLS)")
	fs.DurationVar(&o.failoverCall, "failover-call-timeout", 500*time.Millisecond,
		"the failover workload's bound on each acknowledged publish (its resolution)")
	transports := fs.String("transports", cmp.Or(os.Getenv("BENCH_TRANSPORTS"), "quic,tcp"),
		"comma-separated Felix transports each case runs over, in the same round: quic, tcp (env BENCH_TRANSPORTS)")
	err := fs.Parse(args)
	if err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.smoke {
		def := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		def("workloads", func() { *workloads = "pubsub-4k,fanout" })
		def("fanout-n", func() { *fanoutNs = "10" })
		def("rounds", func() { o.rounds = 1 })
		def("warmup", func() { o.warmup = 0 })
		def("duration", func() { o.duration = 2 * time.Second })
		def("pubsub-duration", func() { o.pubsubDuration = 2 * time.Second })
		def("timeout", func() { o.timeout = 3 * time.Minute })
	}
	if o.transports, err = parseTransports(*transports); err != nil {
		return nil, err
	}
	if o.failoverKills, err = strconv.Atoi(*kills); err != nil || o.failoverKills < 1 {
		return nil, fmt.Errorf("--failover-kills (or BENCH_FAILOVER_KILLS) %q: want a count of at least 1", *kills)
	}
	if o.failoverCall <= 0 {
		return nil, errors.New("--failover-call-timeout must be more than 0")
	}
	if o.casCallers < 1 {
		return nil, errors.New("--cas-callers must be at least 1")
	}
	if o.rounds < 1 || o.warmup < 0 {
		return nil, errors.New("--rounds must be at least 1 and --warmup at least 0")
	}
	if *workloads == "all" || *workloads == "" {
		o.workloads = all
	} else {
		for _, w := range strings.Split(*workloads, ",") {
			w = strings.TrimSpace(w)
			if !slices.Contains(names, w) {
				return nil, fmt.Errorf("unknown workload %q (have %s)", w, strings.Join(names, ","))
			}
			o.workloads = append(o.workloads, w)
		}
	}
	for _, s := range strings.Split(*fanoutNs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--fanout-n: bad count %q", s)
		}
		o.fanoutNs = append(o.fanoutNs, n)
	}
	for _, s := range strings.Split(*watchNs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--watch-n: bad count %q", s)
		}
		o.watchNs = append(o.watchNs, n)
	}
	if o.watchDuration <= 0 || o.watchDuration > time.Minute {
		return nil, errors.New("--watch-duration must be more than 0 and at most 1m")
	}
	// Paths the caller typed are relative to where the wrapper was run.
	if caller := os.Getenv("BENCH_CALLER_DIR"); caller != "" {
		for _, p := range []*string{&o.docsPath, &o.docsFrom} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(caller, *p)
			}
		}
		if set["json"] && !filepath.IsAbs(o.jsonPath) {
			o.jsonPath = filepath.Join(caller, o.jsonPath)
		}
		if set["repo"] && !filepath.IsAbs(o.repo) {
			o.repo = filepath.Join(caller, o.repo)
		}
	}
	return o, nil
}

// run is the harness; it returns the exit code after every child process
// and temp dir is gone.
func run(args []string) int {
	o, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if o.docsFrom != "" {
		if err := docsFromJSON(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := harness(ctx, o, args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if len(rep.Failed) > 0 {
		fmt.Fprintf(os.Stderr, "bench: no figure from: %s\n", strings.Join(rep.Failed, "; "))
		return 1
	}
	return 0
}

// Report is the JSON results file.
type Report struct {
	Started time.Time `json:"started"`
	Command string    `json:"command"`
	Machine Machine   `json:"machine"`
	Rounds  int       `json:"rounds"`
	// Transports are the Felix transports the run compared, in the order
	// each round ran them; empty in results from before the TCP
	// transport (QUIC alone).
	Transports []string  `json:"transports,omitempty"`
	Warmup     int       `json:"warmup_rounds"`
	Series     []*Series `json:"series"`
	Failed     []string  `json:"failed,omitempty"`
	Canceled   bool      `json:"canceled,omitempty"`
}

func harness(ctx context.Context, o *options, args []string) (*Report, error) {
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(repo, "go.mod")); err != nil {
		return nil, fmt.Errorf("--repo %s is not the Felix checkout: %w", repo, err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "felix-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	p := newProcs()
	defer p.stopAll()
	e := &env{o: o, p: p, tmp: tmp, self: self,
		felixes: map[string]*felixNode{}, natses: map[string]*natsNode{}, etcds: map[string]*etcdCluster{}, groups: map[string]*felixCluster{},
		devs: map[string]*felixDev{}, natsCls: map[string]*natsCluster{}, warnings: map[string]string{}}
	if e.tls, err = writeTLS(tmp); err != nil {
		return nil, err
	}
	if os.Getenv("FELIX_BIN") == "" {
		logf("building felix from %s", repo)
	}
	if e.felixBin, err = buildFelix(ctx, repo, tmp); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Command: commandLine(args), Rounds: o.rounds, Warmup: o.warmup, Transports: o.transports,
		Machine: describeMachine(ctx, repo, e.felixBin)}
	for _, w := range allWorkloads() {
		if !slices.Contains(o.workloads, w.name) || ctx.Err() != nil {
			continue
		}
		logf("workload %s", w.name)
		rep.Series = append(rep.Series, runWorkload(ctx, e, w)...)
	}
	rep.Canceled = ctx.Err() != nil
	for _, s := range rep.Series {
		if !s.complete() {
			rep.Failed = append(rep.Failed, strings.TrimSpace(s.Workload+" "+s.Case+" "+s.Metric)+" ("+s.incomplete()+")")
		}
	}
	fmt.Print(renderTable(rep.Series, rep.Transports))
	if err := writeJSON(o.jsonPath, rep); err != nil {
		return rep, err
	}
	logf("results in %s", o.jsonPath)
	if o.writeDocs {
		path := o.docsPath
		if path == "" {
			path = filepath.Join(repo, "docs", "benchmarks.md")
		}
		if rep.Canceled {
			return rep, errors.New("interrupted: docs left as they were")
		}
		if err := writeDocs(path, docsSection(rep)); err != nil {
			return rep, err
		}
		logf("wrote %s", path)
	}
	if rep.Canceled {
		return rep, ctx.Err()
	}
	return rep, nil
}

func writeJSON(path string, rep *Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// commandLine is how the run was started, quoted for a shell.
func commandLine(args []string) string {
	parts := []string{"scripts/bench/run"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$`\\*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// docsFromJSON writes the docs section from a finished run's results.
func docsFromJSON(o *options) error {
	b, err := os.ReadFile(o.docsFrom)
	if err != nil {
		return err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", o.docsFrom, err)
	}
	if rep.Canceled {
		return errors.New(o.docsFrom + " is from an interrupted run")
	}
	path := o.docsPath
	if path == "" {
		path = filepath.Join(o.repo, "docs", "benchmarks.md")
	}
	if err := writeDocs(path, docsSection(&rep)); err != nil {
		return err
	}
	logf("wrote %s", path)
	return nil
}

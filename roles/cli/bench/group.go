package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// groupParams is what `felix bench group` runs.
type groupParams struct {
	mode     string // groupThroughput or groupLatency
	payload  int
	max      int   // records per poll
	steps    []int // throughput: the consumer counts, one step each; latency: one count
	records  int   // throughput: records each step consumes
	publish  bool  // throughput: publish the step's records while consuming, not before
	rate     int   // latency: records published per second
	duration time.Duration
}

const (
	groupThroughput = "throughput"
	groupLatency    = "latency"
	// groupMaxConsumers bounds --consumers (each is its own connection).
	groupMaxConsumers = 64
	// groupMaxPoll is the most records one poll may ask for: the
	// broker's default bound on a group's claims (FELIX_GROUP_MAX_IN_FLIGHT).
	groupMaxPoll = 1000
	// groupStampBytes is the send time at the front of a latency record.
	groupStampBytes = 8
)

// groupCommand is `felix bench group`.
func groupCommand(withClient func(...cli.Flag) []cli.Flag, dur cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "group",
		Usage: "consumer groups on a durable stream: poll + ack throughput (msgs/s) or publish-to-handler latency at a fixed rate (p50/p99)",
		Description: "Creates a durable stream and deletes it at the end. --mode throughput (the default) publishes\n" +
			"--records records (acked, before the clock starts; with --concurrent while the consumers run)\n" +
			"and, for each consumer count of --consumers (N or A..B), starts a fresh group at the\n" +
			"records with that many consumers, each on its own connection, each polling up to --max records\n" +
			"and acknowledging every one of them (the acks of a batch sent together, each answered) before\n" +
			"polling again; a step ends when every record is acked or --duration passes. It reports\n" +
			"acked_msgs_per_s for each count (acked_msgs_per_s_cN) and the best of them.\n" +
			"--mode latency publishes --rate records a second for --duration, each stamped with its intended\n" +
			"send time, to --consumers consumers (default 1) running Group.Consume, and reports the time from\n" +
			"that stamp to the handler (p50/p99/p999). Examples:\n\n" +
			"   felix bench group --consumers 1..4 --max 100 --payload 4096\n" +
			"   felix bench group --mode latency --rate 100 --duration 10s",
		Flags: withClient(dur,
			&cli.StringFlag{Name: "mode", Value: groupThroughput, Usage: "throughput or latency"},
			&cli.IntFlag{Name: "payload", Value: 4096, Usage: "record size in bytes (latency: at least 8)"},
			&cli.StringFlag{Name: "consumers", Value: "1..4", Usage: "consumer count N, or A..B for one step per count (latency: one count, default 1)"},
			&cli.IntFlag{Name: "max", Value: 100, Usage: "records per poll"},
			&cli.IntFlag{Name: "records", Value: 20000, Usage: "throughput: records each step consumes"},
			&cli.BoolFlag{Name: "concurrent", Usage: "throughput: publish each step's records while its consumers run"},
			&cli.IntFlag{Name: "rate", Value: 100, Usage: "latency: records published per second"}),
		Action: func(c *cli.Context) error {
			p, err := groupParamsFrom(c.String("mode"), c.String("consumers"), c.IsSet("consumers"), groupParams{
				payload: c.Int("payload"), max: c.Int("max"), records: c.Int("records"), publish: c.Bool("concurrent"),
				rate: c.Int("rate"), duration: bounded(c.Duration("duration"))})
			if err != nil {
				return cli.Exit("error: "+err.Error(), 2)
			}
			return run(c, func(ctx context.Context, t *target) (*result, error) { return runGroup(ctx, t, p) })
		},
	}
}

// groupParamsFrom completes p with the mode and consumer counts and checks
// it, naming every bad value at once.
func groupParamsFrom(mode, consumers string, consumersSet bool, p groupParams) (groupParams, error) {
	p.mode = mode
	var errs []error
	if mode == groupLatency && !consumersSet {
		consumers = "1"
	}
	steps, err := parseConsumers(consumers)
	if err != nil {
		errs = append(errs, err)
	}
	p.steps = steps
	switch mode {
	case groupThroughput:
		if p.records < 1 {
			errs = append(errs, fmt.Errorf("--records %d: want at least 1", p.records))
		}
		if p.payload < 1 {
			errs = append(errs, fmt.Errorf("--payload %d: want at least 1", p.payload))
		}
	case groupLatency:
		if len(steps) > 1 {
			errs = append(errs, fmt.Errorf("--consumers %s: latency takes one count", consumers))
		}
		if p.rate < 1 {
			errs = append(errs, fmt.Errorf("--rate %d: want at least 1", p.rate))
		}
		if p.payload < groupStampBytes {
			errs = append(errs, fmt.Errorf("--payload %d: latency needs at least %d bytes for the send time", p.payload, groupStampBytes))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown --mode %q: want %s or %s", mode, groupThroughput, groupLatency))
	}
	if p.max < 1 || p.max > groupMaxPoll {
		errs = append(errs, fmt.Errorf("--max %d: want 1 to %d", p.max, groupMaxPoll))
	}
	return p, errors.Join(errs...)
}

// parseConsumers reads N or A..B (1 ≤ A ≤ B ≤ groupMaxConsumers) as the
// counts to run, in order.
func parseConsumers(s string) ([]int, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "..")
	if !isRange {
		hi = lo
	}
	a, errA := strconv.Atoi(strings.TrimSpace(lo))
	b, errB := strconv.Atoi(strings.TrimSpace(hi))
	if errA != nil || errB != nil || a < 1 || b < a || b > groupMaxConsumers {
		return nil, fmt.Errorf("--consumers %q: want N or A..B with 1 ≤ A ≤ B ≤ %d", s, groupMaxConsumers)
	}
	out := make([]int, 0, b-a+1)
	for n := a; n <= b; n++ {
		out = append(out, n)
	}
	return out, nil
}

// groupStep is what one throughput step counted.
type groupStep struct {
	consumers  int
	acked      int64 // acks answered without error
	elapsed    time.Duration
	pollErrors int64
	ackErrors  int64
}

func (s groupStep) msgsPerS() float64 {
	return float64(s.acked) / max(s.elapsed, time.Microsecond).Seconds()
}

// groupThroughputResult shapes the steps into figures: each step's under
// its consumer count (acked_msgs_per_s_c2), then the best step's
// unsuffixed, so a caller that ran one count reads acked_msgs_per_s.
func groupThroughputResult(p groupParams, steps []groupStep) *result {
	r := &result{Scenario: "group", Params: map[string]any{
		"mode": groupThroughput, "payload_bytes": p.payload, "max": p.max, "records": p.records,
		"concurrent": p.publish, "consumers": formatSteps(p.steps), "duration": p.duration.String()}}
	best := -1
	for i, s := range steps {
		sfx := fmt.Sprintf("_c%d", s.consumers)
		r.add("acked_msgs_per_s"+sfx, s.msgsPerS(), "msg/s")
		r.add("acked"+sfx, float64(s.acked), "msgs")
		if best < 0 || s.msgsPerS() > steps[best].msgsPerS() {
			best = i
		}
	}
	if best < 0 {
		return r
	}
	b := steps[best]
	var pollErrs, ackErrs int64
	for _, s := range steps {
		pollErrs, ackErrs = pollErrs+s.pollErrors, ackErrs+s.ackErrors
	}
	r.add("best_consumers", float64(b.consumers), "consumers")
	r.add("acked_msgs_per_s", b.msgsPerS(), "msg/s")
	r.add("acked_mb_per_s", b.msgsPerS()*float64(p.payload)/1e6, "MB/s")
	r.add("acked", float64(b.acked), "msgs")
	r.add("measured_s", b.elapsed.Seconds(), "s")
	r.add("poll_errors", float64(pollErrs), "calls")
	r.add("ack_errors", float64(ackErrs), "calls")
	return r
}

func formatSteps(steps []int) string {
	if len(steps) == 1 {
		return strconv.Itoa(steps[0])
	}
	if len(steps) == 0 {
		return ""
	}
	return fmt.Sprintf("%d..%d", steps[0], steps[len(steps)-1])
}

// groupLatencyMeasure is what a latency run counted.
type groupLatencyMeasure struct {
	sent, handled, errors int64
	lagMax                time.Duration
	lat                   *latencies
}

func groupLatencyResult(p groupParams, m groupLatencyMeasure) *result {
	r := &result{Scenario: "group", Params: map[string]any{
		"mode": groupLatency, "payload_bytes": p.payload, "max": p.max, "rate": p.rate,
		"consumers": formatSteps(p.steps), "duration": p.duration.String()}}
	r.add("published", float64(m.sent), "msgs")
	r.add("handled", float64(m.handled), "msgs")
	r.add("lost", float64(max(0, m.sent-m.handled)), "msgs")
	r.add("errors", float64(m.errors), "calls")
	r.add("publisher_lag_max", ms(m.lagMax), "ms")
	r.addLatency("publish_to_handler", m.lat)
	return r
}

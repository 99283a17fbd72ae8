package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

type idleParams struct {
	count       int
	connections int
	hold        time.Duration
	brokerPID   int           // >0: measure this process's VmRSS before and after
	settle      time.Duration // wait before reading the RSS after opening
}

// runSubsIdle opens p.count subscriptions that receive nothing, spread over
// p.connections connections, holds them for p.hold and reports how many
// opened. Given the broker's PID it also reports the broker's resident set
// growth per subscription, read from /proc.
func runSubsIdle(ctx context.Context, t *target, p idleParams) (*result, error) {
	p.connections = min(max(1, p.connections), max(1, p.count))
	stream, err := t.admin.createStream(ctx, t.ns, "bench-idle", streamSpec{shards: 1})
	if err != nil {
		return nil, err
	}
	defer t.admin.deleteStream(context.Background(), t.ns, stream)
	var before int64
	if p.brokerPID > 0 {
		if before, err = vmRSS(p.brokerPID); err != nil {
			return nil, err
		}
	}
	clients := make([]*felix.Client, 0, p.connections)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range p.connections {
		c, err := t.connect(ctx)
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", len(clients), err)
		}
		clients = append(clients, c)
	}
	subs := make([]*felix.Subscription, 0, p.count)
	defer func() {
		for _, s := range subs {
			s.Close()
		}
	}()
	start := time.Now()
	var openErr error
	for i := range p.count {
		s, err := subscribeWhenReady(ctx, clients[i%len(clients)], t.ns, stream)
		if err != nil {
			openErr = err
			break
		}
		subs = append(subs, s)
	}
	openElapsed := time.Since(start)
	r := &result{Scenario: "subs-idle", Params: map[string]any{
		"count": p.count, "connections": p.connections, "hold": p.hold.String(), "broker_pid": p.brokerPID,
	}}
	r.add("opened", float64(len(subs)), "subscriptions")
	r.add("opened_per_s", float64(len(subs))/openElapsed.Seconds(), "subscriptions/s")
	if openErr != nil && len(subs) == 0 {
		return nil, openErr
	}
	if err := sleepCtx(ctx, p.settle); err != nil {
		return nil, err
	}
	if p.brokerPID > 0 {
		after, err := vmRSS(p.brokerPID)
		if err != nil {
			return nil, err
		}
		r.add("broker_rss_before", float64(before), "bytes")
		r.add("broker_rss_after", float64(after), "bytes")
		if len(subs) > 0 {
			r.add("broker_rss_per_subscription", float64(after-before)/float64(len(subs)), "bytes")
		}
	}
	if err := sleepCtx(ctx, p.hold); err != nil {
		return nil, err
	}
	return r, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// vmRSS reads a process's resident set size in bytes from /proc.
func vmRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 1 {
			break
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS of %d: %w", pid, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS for process %d", pid)
}

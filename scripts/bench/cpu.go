package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Broker CPU per delivery: the CPU time (user + system, every thread) the
// broker's server process used while one run of a case went on, divided by
// the deliveries that run made. The server is a child process on both sides
// (felix serve; the re-executed serve-nats), and the load generators run in
// other processes, so the figure is the server's alone. The window is the
// whole run, connection set-up and teardown included, for both sides.

// cpuPerDelivery is the figure's key in Felix's and the peer's figures.
const cpuPerDelivery = "broker_cpu_us_per_delivery"

var cpuMetric = metric{"broker CPU per delivery", "µs", true, cpuPerDelivery, cpuPerDelivery}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports (the kernel's ABI, whatever its HZ).
const clockTicks = 100

// procCPU is the CPU time process pid has used so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime + stime from a /proc/<pid>/stat line. The
// command name (field 2) may hold spaces and parentheses, so the fields are
// counted after its last ')': state is field 3, utime 14, stime 15.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat without a command name: %q", clip(stat, 80))
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat has %d fields after the name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat time %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// withServerCPU runs f and adds cpuPerDelivery to its figures, from the CPU
// time process pid used during f and f's "delivered" figure. It adds
// nothing when f failed, delivered nothing or the times could not be read
// (the series then shows that figure as missing).
func withServerCPU(pid int, f func() (figures, error)) (figures, error) {
	before, berr := procCPU(pid)
	fig, err := f()
	after, aerr := procCPU(pid)
	if err != nil || berr != nil || aerr != nil || fig == nil {
		return fig, err
	}
	if d := fig["delivered"]; d > 0 {
		fig[cpuPerDelivery] = float64(after-before) / float64(time.Microsecond) / d
	}
	return fig, nil
}

// Broker CPU per replicated MB: the CPU time (user + system, every thread)
// the servers of a replicated run used while it went on, summed over the
// three servers, divided by the megabytes (10^6 bytes) of payload their
// clients had acknowledged. Every server is its own process on both sides
// (felix dev's three nodes; three serve-nats children), the load generators
// run in other processes, and the window is the whole run, set-up included.

// cpuPerMB is the figure's key in Felix's and the peer's figures.
const cpuPerMB = "broker_cpu_ms_per_mb"

var cpuPerMBMetric = metric{"broker CPU per replicated MB", "ms", true, cpuPerMB, cpuPerMB}

// withServersCPU runs f and adds cpuPerMB to its figures, from the CPU time
// processes pids used during f and f's count figure (acknowledged
// messages) times payload bytes. Like withServerCPU it adds nothing when f
// failed, acknowledged nothing or a time could not be read.
func withServersCPU(pids []int, count string, payload int, f func() (figures, error)) (figures, error) {
	before, berr := sumCPU(pids)
	fig, err := f()
	after, aerr := sumCPU(pids)
	if err != nil || berr != nil || aerr != nil || fig == nil {
		return fig, err
	}
	if mb := fig[count] * float64(payload) / 1e6; mb > 0 {
		fig[cpuPerMB] = float64(after-before) / float64(time.Millisecond) / mb
	}
	return fig, nil
}

// sumCPU is the CPU time the processes pids have used so far, together.
func sumCPU(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		t, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		total += t
	}
	return total, nil
}

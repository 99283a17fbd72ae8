// Package metricdoc gives Felix's metric families their Prometheus
// metadata. github.com/VictoriaMetrics/metrics writes "# TYPE" lines (once
// metrics.ExposeMetadata is on) but an empty "# HELP name" line, which the
// Prometheus text format reads as a plain comment; Write fills in the text
// each family registered with Describe.
//
// The package where a metric is created describes it there, once per
// family (the text is documentation: the same for every instance, so one
// process-wide table is enough while the values stay per instance). A
// family nobody described gets a generic text naming where it comes from,
// so the exposition never has a family without HELP; a test of each
// package checks that its own felix_* families are described.
package metricdoc

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// help maps a family name to its HELP text. Guarded by mu.
var (
	mu   sync.RWMutex
	help = map[string]string{}
)

// Describe records the HELP text of each family in m (family name, without
// labels, to one line of text). Describing a family again replaces its text.
func Describe(m map[string]string) {
	mu.Lock()
	defer mu.Unlock()
	for family, text := range m {
		help[family] = text
	}
}

// Help returns the text family was described with.
func Help(family string) (string, bool) {
	mu.RLock()
	defer mu.RUnlock()
	t, ok := help[family]
	return t, ok
}

// Write runs write (something that writes Prometheus text, such as
// Set.WritePrometheus or metrics.WritePrometheus) with the library's
// metadata on, and copies its output to w with every HELP line filled in.
func Write(w io.Writer, write func(io.Writer)) error {
	metrics.ExposeMetadata(true)
	var buf bytes.Buffer
	write(&buf)
	bw := bufio.NewWriter(w)
	for line := range strings.Lines(buf.String()) {
		bw.WriteString(fill(line))
	}
	return bw.Flush()
}

// fill returns line with its HELP text when it is a HELP line without one.
func fill(line string) string {
	rest, ok := strings.CutPrefix(line, "# HELP ")
	if !ok {
		return line
	}
	family := strings.TrimSpace(rest)
	if strings.ContainsAny(family, " \t") {
		return line // it has a text already
	}
	text, ok := Help(family)
	if !ok {
		text = fallback(family)
	}
	return "# HELP " + family + " " + escape(text) + "\n"
}

// fallback names where an undescribed family comes from.
func fallback(family string) string {
	switch {
	case strings.HasPrefix(family, "go_"):
		return "Go runtime metric " + family + " (see the runtime and runtime/metrics packages)."
	case strings.HasPrefix(family, "process_"):
		return "Process metric " + family + " of this operating-system process."
	default:
		return family + " (not described)."
	}
}

// escape escapes a HELP text as the text format requires.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

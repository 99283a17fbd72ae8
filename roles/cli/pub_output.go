package cli

import "github.com/felixmq/felix/sdk/felix"

// maxReportedOffsets bounds the offsets pub -o json keeps for its one
// document; past it the list stops and offsets_truncated says so (text
// output streams every offset and keeps none).
const maxReportedOffsets = 1 << 20

// pubReport is what felix pub prints: in text, each acknowledged offset as
// it arrives, and for acknowledgements without offsets (a stream that is
// not durable) a count at the end; in JSON one document at the end.
type pubReport struct {
	out    printer
	stream string
	// published counts the messages handed to the client (and, with --ack,
	// acknowledged). Invariant: len(offsets) <= min(published, maxReportedOffsets).
	published  int
	offsets    []uint64
	truncated  bool // an offset was not kept (maxReportedOffsets)
	unnumbered int  // acknowledged without an offset
}

func newPubReport(out printer, stream string) *pubReport {
	return &pubReport{out: out, stream: stream}
}

// sent records one message the client took; with an offset, text output
// prints it at once.
func (r *pubReport) sent(res felix.PublishResult) error {
	r.published++
	if !res.HasOffset {
		r.unnumbered++
		return nil
	}
	if !r.out.json {
		return r.out.Line("offset %d", res.Offset)
	}
	if len(r.offsets) < maxReportedOffsets {
		r.offsets = append(r.offsets, res.Offset)
	} else {
		r.truncated = true
	}
	return nil
}

// finish prints the end of the report once every message went out (and,
// without acks, the client flushed them).
func (r *pubReport) finish(acked bool) error {
	if r.out.json {
		doc := map[string]any{"stream": r.stream, "published": r.published, "acked": acked}
		if len(r.offsets) > 0 {
			doc["offsets"] = r.offsets
		}
		if r.truncated {
			doc["offsets_truncated"] = true
		}
		return r.out.JSON(doc)
	}
	if acked && r.unnumbered > 0 {
		return r.out.Line("%d message(s) acknowledged (stream %s keeps no offsets: it is not durable)", r.unnumbered, r.stream)
	}
	return nil
}

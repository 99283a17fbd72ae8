package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The consumer-group workloads (issue #19): group poll + ack throughput and
// publish-to-handler latency through a group, Felix's groups against a
// JetStream durable pull consumer with explicit acks, both on file storage.

// Group load shape, the same on both sides.
const (
	groupPayload = 4096
	groupBatch   = 100   // records per poll or Fetch
	groupRecords = 20000 // records each run drains
	groupRate    = 100   // records per second in group-latency
)

const groupNote = "4 KiB records, 20,000 pre-published (acked) before the clock starts, drained through a new group: Felix " +
	"`felix bench group`, each consumer on its own connection polling up to 100 records and acking each of them, the acks " +
	"of one poll sent together and every one answered before the next poll; JetStream: a durable pull consumer with " +
	"AckExplicit (default MaxAckPending 1,000, as Felix's FELIX_GROUP_MAX_IN_FLIGHT), each consumer on its own connection " +
	"calling Fetch(100) and Ack() on each message (nats.go's Ack is not answered; each connection is flushed before the " +
	"clock stops; the harness logs any delivery the consumer still holds unacked afterwards). A run ends when every record is acked or after --duration; msgs/s is acks over that time. Felix periodic " +
	"fsync (250 ms), JetStream default sync interval."

const groupLatencyNote = "One 4 KiB record at a time through a group at 100 records/s, stamped with its intended send " +
	"time; latency is from that stamp to the consumer's handler. Felix: fire-and-forget publish to a durable stream, one " +
	"consumer in `Group.Consume` (polls of up to 100 waiting up to 1 s; acks after the handler); JetStream: core publish " +
	"to the stream's subject, one durable pull consumer with AckExplicit in `Consume` (PullMaxMessages 100), Ack() after " +
	"the handler. Felix periodic fsync (250 ms), JetStream default sync interval."

func groupWorkloads() []workload {
	return []workload{
		{name: "group", peer: "JetStream pull consumer, file storage (TLS)", note: groupNote,
			cases: func(o *options) []caseSpec { return []caseSpec{groupCase(o, 1), groupCase(o, 4)} }},
		{name: "group-latency", peer: "JetStream pull consumer, file storage (TLS)", note: groupLatencyNote,
			cases: func(o *options) []caseSpec { return []caseSpec{groupLatencyCase(o)} }},
	}
}

func groupCase(o *options, consumers int) caseSpec {
	d := o.duration
	name := fmt.Sprintf("%d consumer", consumers)
	if consumers > 1 {
		name += "s"
	}
	return caseSpec{
		name:    name + ", batches of 100",
		metrics: []metric{{"acked", "msgs/s", false, "acked_msgs_per_s", "acked_msgs_per_s"}},
		felix: func(ctx context.Context, e *env, tr string) (figures, error) {
			n, err := e.felix(ctx, "periodic", durableEnv("periodic")...)
			if err != nil {
				return nil, err
			}
			f, err := e.felixBench(ctx, n, 2*d, tr, "group", "--consumers", strconv.Itoa(consumers),
				"--max", strconv.Itoa(groupBatch), "--records", strconv.Itoa(groupRecords),
				"--payload", strconv.Itoa(groupPayload), "--duration", secs(d))
			e.checkOnDisk("group", n)
			return f, err
		},
		peer: func(ctx context.Context, e *env) (figures, error) {
			n, err := e.nats(ctx, "js-periodic", natsConfig{jetstream: true})
			if err != nil {
				return nil, err
			}
			return natsGroup(ctx, n, groupLoad{payload: groupPayload, records: groupRecords, batch: groupBatch,
				consumers: consumers, duration: d})
		},
	}
}

func groupLatencyCase(o *options) caseSpec {
	d := o.duration
	return caseSpec{
		name:    fmt.Sprintf("4 KiB at %d records/s, 1 consumer", groupRate),
		metrics: append(latencyMetrics("publish_to_handler"), metric{"lost", "msgs", true, "lost", "lost"}),
		felix: func(ctx context.Context, e *env, tr string) (figures, error) {
			n, err := e.felix(ctx, "periodic", durableEnv("periodic")...)
			if err != nil {
				return nil, err
			}
			return e.felixBench(ctx, n, d+10*time.Second, tr, "group", "--mode", "latency", "--consumers", "1",
				"--max", strconv.Itoa(groupBatch), "--rate", strconv.Itoa(groupRate),
				"--payload", strconv.Itoa(groupPayload), "--duration", secs(d))
		},
		peer: func(ctx context.Context, e *env) (figures, error) {
			n, err := e.nats(ctx, "js-periodic", natsConfig{jetstream: true})
			if err != nil {
				return nil, err
			}
			return natsGroupLatency(ctx, n, groupPayload, groupBatch, groupRate, d)
		},
	}
}

// Package bench is `felix bench`: load generators that measure a running
// broker through the Go SDK and the control plane, and the QUIC transport's
// own ceiling on this machine (quic-raw).
//
// Scenarios: pubsub (fire-and-forget or acked with --inflight callers,
// optionally --durable), durable (pubsub and latency on a durable stream,
// by --mode), group (consumer groups on a durable stream: poll + ack
// throughput for each of a range of consumer counts, or publish-to-handler
// latency at a fixed rate, by --mode), fanout (a fixed offered rate to N
// subscribers, latency from each message's intended send time; --max
// searches the highest rate kept up with), latency, cache (a get/put mix,
// acked puts, one put at a time or compare-and-set on one key, by --mode),
// subs-idle (N idle subscriptions; with --broker-pid the broker's RSS
// growth per subscription from /proc), meta (control-plane stream creates per
// second) and quic-raw.
//
// Every scenario is bounded in time and message count, creates uniquely
// named streams or caches and deletes them at the end, talks only to the
// addresses it is given, and prints figures as a table or, with -o json,
// one JSON object on one line (scripts/bench reads that).
package bench

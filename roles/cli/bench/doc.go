// Package bench is `felix bench`: load generators that measure a running
// broker through the Go SDK (pubsub, fanout, latency, cache) and the QUIC
// transport's own ceiling on this machine (quic-raw). Every scenario is
// bounded in time and message count, talks only to the addresses it is
// given, and prints figures as a table or, with -o json, one JSON object.
package bench

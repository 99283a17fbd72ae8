package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// The durable-idempotent workload (issue #19): acked publishing through
// idempotent producers against plain acked publishing on the same broker in
// the same run (target: at least 0.9 of it), and against JetStream
// publishing with a unique Nats-Msg-Id per message, which JetStream also
// runs beside its own plain acked publishing.

const idemNote = "4 KiB, 256 in flight, periodic fsync every 250 ms / JetStream's default sync interval, both bounded to 1 GiB. " +
	"Each run measures both modes on the same server, one after the other, the order swapped every run: Felix `felix bench " +
	"durable --mode idempotent` (four idempotent producers of 64 batches in flight each) and `--mode acked`; JetStream async " +
	"publishing with a unique Nats-Msg-Id on every message (checked against the stream's default 2-minute duplicate window) " +
	"and without. The idempotent / plain row is each side's ratio within its own run; its Felix/peer column compares those ratios."

// Figure names of a durable-idempotent run, Felix's and JetStream's.
const (
	idemMsgs       = "idempotent_msgs_per_s"
	idemPlainMsgs  = "plain_msgs_per_s"
	idemOverPlain  = "idempotent_over_plain"
	dedupMsgs      = "dedup_msgs_per_s"
	dedupOverPlain = "dedup_over_plain"
)

func durableIdempotentWorkload() workload {
	return workload{name: "durable-idempotent", peer: "JetStream, file storage, Nats-Msg-Id (TLS)", note: idemNote,
		cases: func(o *options) []caseSpec { return []caseSpec{durableIdempotent(o)} }}
}

func durableIdempotent(o *options) caseSpec {
	d := o.duration
	// Each side swaps the order of its two modes every round (Felix per
	// transport); the runs of a case are sequential.
	felixRuns, peerRuns := map[string]int{}, 0
	return caseSpec{
		name: "4 KiB, 256 in flight, fsync periodic",
		metrics: []metric{
			{"idempotent acked", "msgs/s", false, idemMsgs, dedupMsgs},
			{"plain acked", "msgs/s", false, idemPlainMsgs, idemPlainMsgs},
			{"idempotent / plain acked", "×", false, idemOverPlain, dedupOverPlain},
		},
		felix: func(ctx context.Context, e *env, tr string) (figures, error) {
			n, err := e.felix(ctx, "periodic", durableEnv("periodic")...)
			if err != nil {
				return nil, err
			}
			mode := func(m string) func() (figures, error) {
				return func() (figures, error) {
					return e.felixBench(ctx, n, d, tr, "durable", "--mode", m, "--inflight", "256", "--payload", "4096",
						"--policy", "block", "--duration", secs(d))
				}
			}
			felixRuns[tr]++
			f, err := runPair(felixRuns[tr]%2 == 0, mode("idempotent"), mode("acked"), "published_msgs_per_s", idemMsgs, idemPlainMsgs, idemOverPlain)
			e.checkOnDisk("durable-idempotent", n)
			return f, err
		},
		peer: func(ctx context.Context, e *env) (figures, error) {
			n, err := e.nats(ctx, "js-periodic", natsConfig{jetstream: true})
			if err != nil {
				return nil, err
			}
			mode := func(msgIDs bool) func() (figures, error) {
				return func() (figures, error) {
					return natsAckedWith(ctx, n, jetstream.FileStorage, 4096, 256, d, msgIDs)
				}
			}
			peerRuns++
			return runPair(peerRuns%2 == 0, mode(true), mode(false), "acked_msgs_per_s", dedupMsgs, idemPlainMsgs, dedupOverPlain)
		},
	}
}

// runPair runs the two modes of a run, plainFirst choosing the order, and
// returns each mode's key figure under its own name and their ratio.
func runPair(plainFirst bool, mode, plain func() (figures, error), key, modeName, plainName, ratioName string) (figures, error) {
	first, second := mode, plain
	if plainFirst {
		first, second = plain, mode
	}
	a, err := first()
	if err != nil {
		return nil, err
	}
	b, err := second()
	if err != nil {
		return nil, err
	}
	if plainFirst {
		a, b = b, a
	}
	return pairFigures(a, b, key, modeName, plainName, ratioName)
}

// pairFigures takes key from a mode's run and from the plain run and
// names them modeName and plainName, with their ratio as ratioName.
func pairFigures(mode, plain figures, key, modeName, plainName, ratioName string) (figures, error) {
	m, ok1 := mode[key]
	p, ok2 := plain[key]
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("no figure %s from both runs", key)
	}
	f := figures{modeName: m, plainName: p}
	if p > 0 {
		f[ratioName] = m / p
	}
	return f, nil
}

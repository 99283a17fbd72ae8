package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// groupLoad is the shape of a group throughput run.
type groupLoad struct {
	payload, records, batch, consumers int
	duration                           time.Duration
}

// natsGroup pre-publishes the records to a file-storage JetStream stream
// and drains them through one durable pull consumer with explicit acks,
// each of l.consumers on its own connection fetching l.batch at a time and
// acking every message, until every record is acked or l.duration passes.
func natsGroup(ctx context.Context, n *natsNode, l groupLoad) (figures, error) {
	nc, err := n.connect("bench-js-group-admin")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	name := fmt.Sprintf("BENCHGRP%d", time.Now().UnixNano())
	js, s, err := jsGroupStream(ctx, nc, name)
	if err != nil {
		return nil, err
	}
	defer js.DeleteStream(context.Background(), name)
	if err := jsPrepublish(ctx, js, name+".x", l.payload, l.records); err != nil {
		return nil, err
	}
	if _, err := s.CreateOrUpdateConsumer(ctx, jsGroupConsumer()); err != nil {
		return nil, err
	}
	var conns []*nats.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var cons []jetstream.Consumer
	for i := range l.consumers {
		c, err := n.connect(fmt.Sprintf("bench-js-group-%d", i))
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		cjs, err := jetstream.New(c)
		if err != nil {
			return nil, err
		}
		cc, err := cjs.Consumer(ctx, name, "bench")
		if err != nil {
			return nil, err
		}
		cons = append(cons, cc)
	}
	stepCtx, stop := context.WithTimeout(ctx, l.duration)
	defer stop()
	var acked, fetchErrs atomic.Int64
	want := int64(l.records)
	var wg sync.WaitGroup
	begin := time.Now()
	for i, cc := range cons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns[i].Flush()
			for stepCtx.Err() == nil && acked.Load() < want {
				b, err := cc.Fetch(l.batch, jetstream.FetchMaxWait(200*time.Millisecond))
				if err != nil {
					fetchErrs.Add(1)
					continue
				}
				var k int64
				for m := range b.Messages() {
					if m.Ack() == nil {
						k++
					}
				}
				if acked.Add(k) >= want {
					stop()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	f := figures{
		"acked":            float64(acked.Load()),
		"acked_msgs_per_s": float64(acked.Load()) / elapsed.Seconds(),
		"measured_s":       elapsed.Seconds(),
		"fetch_errors":     float64(fetchErrs.Load()),
	}
	// Ack() is not answered: say so when the server had not taken every
	// ack once the connections were flushed.
	if info, err := cons[0].Info(ctx); err == nil {
		f["ack_pending"] = float64(info.NumAckPending)
		if info.NumAckPending > 0 {
			logf("group: JetStream still held %d unacknowledged deliveries after the run", info.NumAckPending)
		}
	}
	return f, ctx.Err()
}

// jsGroupStream creates a file-storage stream name on subjects name.>,
// bounded like the acked runs' streams.
func jsGroupStream(ctx context.Context, nc *nats.Conn, name string) (jetstream.JetStream, jetstream.Stream, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return nil, nil, err
	}
	s, err := js.CreateOrUpdateStream(ctx, benchStreamConfig(name, jetstream.FileStorage, 1))
	return js, s, err
}

// jsGroupConsumer is the durable pull consumer both group runs read
// through: every message from the first, each acked on its own.
func jsGroupConsumer() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy}
}

// jsPrepublish publishes n messages asynchronously and waits for every
// acknowledgement.
func jsPrepublish(ctx context.Context, js jetstream.JetStream, subject string, payload, n int) error {
	msg := make([]byte, payload)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if _, err := js.PublishAsync(subject, msg, jetstream.WithStallWait(10*time.Second)); err != nil {
			return fmt.Errorf("jetstream: pre-publishing: %w", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-time.After(60 * time.Second):
		return errors.New("jetstream: pre-published records not acknowledged within 60s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// natsGroupLatency publishes one message at a time at rate for d, each
// stamped with its intended send time, through a core publish to a
// file-storage stream, and measures from the stamp to the handler of one
// durable pull consumer in Consume, which acks after the handler.
func natsGroupLatency(ctx context.Context, n *natsNode, payload, batch, rate int, d time.Duration) (figures, error) {
	nc, err := n.connect("bench-js-group-pub")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	name := fmt.Sprintf("BENCHGRPLAT%d", time.Now().UnixNano())
	js, s, err := jsGroupStream(ctx, nc, name)
	if err != nil {
		return nil, err
	}
	defer js.DeleteStream(context.Background(), name)
	if _, err := s.CreateOrUpdateConsumer(ctx, jsGroupConsumer()); err != nil {
		return nil, err
	}
	cnc, err := n.connect("bench-js-group-sub")
	if err != nil {
		return nil, err
	}
	defer cnc.Close()
	cjs, err := jetstream.New(cnc)
	if err != nil {
		return nil, err
	}
	cons, err := cjs.Consumer(ctx, name, "bench")
	if err != nil {
		return nil, err
	}
	rec := newRecorder(100000)
	var handled atomic.Int64
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if data := m.Data(); len(data) >= 8 {
			rec.add(time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(data))))
		}
		handled.Add(1)
		m.Ack()
	}, jetstream.PullMaxMessages(batch))
	if err != nil {
		return nil, err
	}
	defer cc.Stop()
	sched := newSchedule(time.Now(), rate)
	count := sched.count(d)
	var sent int64
	for ; sent < count && ctx.Err() == nil; sent++ {
		due := sched.due(sent)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		msg := make([]byte, payload)
		binary.BigEndian.PutUint64(msg, uint64(due.UnixNano()))
		if err := nc.Publish(name+".x", msg); err != nil {
			return nil, err
		}
	}
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		return nil, err
	}
	settle(ctx, handled.Load, sent)
	q := rec.quantilesMS(0.5, 0.99, 0.999)
	if q == nil {
		return nil, errors.New("jetstream: no record reached the consumer")
	}
	return figures{"p50_ms": q[0], "p99_ms": q[1], "p999_ms": q[2],
		"handled": float64(handled.Load()), "lost": float64(max(0, sent-handled.Load()))}, ctx.Err()
}

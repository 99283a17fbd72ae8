package e2e

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// TestLossyLinkDeliversEverythingInOrder puts a proxy that loses 5% of
// datagrams (and delays the rest by up to 2 ms) between the clients and
// the broker: QUIC must recover every loss, so a Block-policy subscriber
// gets every acknowledged publish exactly once and in order. Over TCP the
// proxy delays every chunk by up to 2 ms and stalls the link now and then
// instead (TCP recovers losses beneath the proxy).
func TestLossyLinkDeliversEverythingInOrder(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "lossy", "--policy", "block")

	const seed = 7
	var pubAddr, subAddr string
	var faults func() int64
	if e2eTransport == felix.TransportTCP {
		pubProxy, subProxy := newTCPProxy(t, n.client.BrokerAddr), newTCPProxy(t, n.client.BrokerAddr)
		pubProxy.delay.Store(int64(time.Millisecond))
		subProxy.delay.Store(int64(2 * time.Millisecond))
		stalls := stallNowAndThen(ctx, subProxy, 20*time.Millisecond, 10*time.Millisecond)
		pubAddr, subAddr = pubProxy.addr(), subProxy.addr()
		faults = func() int64 { return stalls.Load() + pubProxy.delayed.Load() + subProxy.delayed.Load() }
	} else {
		pubProxy, subProxy := newUDPProxy(t, n.client.BrokerAddr), newUDPProxy(t, n.client.BrokerAddr)
		for _, p := range []*udpProxy{pubProxy, subProxy} {
			p.drop = lossy(0.05, seed)
			p.delay = func(bool) time.Duration { return time.Duration(time.Now().UnixNano()%2000) * time.Microsecond }
		}
		pubAddr, subAddr = pubProxy.addr(), subProxy.addr()
		faults = func() int64 { return pubProxy.dropped.Load() + subProxy.dropped.Load() }
	}
	cfg := func(addr string) felix.Config {
		c := n.sdkConfig(n.adminToken())
		c.Addr, c.ServerName = addr, "127.0.0.1"
		return c
	}
	sc, err := felix.Connect(ctx, cfg(subAddr))
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	defer sc.Close()
	var sub *felix.Subscription
	eventually(t, 20*time.Second, "subscribe through the lossy proxy", func() bool {
		sub, err = sc.Subscribe(ctx, "default", "lossy")
		return err == nil
	})
	pc, err := felix.Connect(ctx, cfg(pubAddr))
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	defer pc.Close()

	const total = 2000
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for i := 0; i < total; i++ {
			msg := []byte(fmt.Sprintf("m%05d", i))
			ack := felix.AckNone
			if i%50 == 49 {
				ack = felix.AckPerMessage // keep the publisher honest about progress
			}
			if err := pc.Publish(ctx, "default", "lossy", msg, ack); err != nil {
				t.Errorf("publish %d: %v", i, err)
				return
			}
		}
		if err := pc.Finish(ctx); err != nil {
			t.Errorf("finish: %v", err)
		}
	}()
	defer func() { cancel(); <-pubDone }() // the publisher never outlives the test
	for i := 0; i < total; i++ {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", i, err)
		}
		if want := fmt.Sprintf("m%05d", i); string(ev.Payload) != want {
			t.Fatalf("event %d is %q, want %q", i, ev.Payload, want)
		}
	}
	<-pubDone
	if faults() == 0 {
		t.Fatal("the proxies injected no fault, so the test proved nothing")
	}
	t.Logf("the proxies injected %d faults (dropped datagrams or stalls)", faults())
}

// TestStalledBrokerEndsSubscriptionLoudly stops the broker with SIGSTOP: a
// subscriber must learn that its subscription is lost once the idle
// timeout passes, rather than wait forever on a silent connection.
func TestStalledBrokerEndsSubscriptionLoudly(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "stall")
	cfg := n.sdkConfig(n.adminToken())
	cfg.KeepAlive, cfg.MaxIdleTimeout = 300*time.Millisecond, 2*time.Second
	c, err := felix.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sub *felix.Subscription
	eventually(t, 10*time.Second, "subscribe", func() bool {
		sub, err = c.Subscribe(ctx, "default", "stall")
		return err == nil
	})
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer n.cmd.Process.Signal(syscall.SIGCONT)
	start := time.Now()
	nextCtx, nextCancel := context.WithTimeout(ctx, 30*time.Second)
	defer nextCancel()
	_, err = sub.Next(nextCtx)
	if !errors.Is(err, felix.ErrSubscriptionLost) {
		t.Fatalf("Next on a stalled broker: %v after %v, want ErrSubscriptionLost", err, time.Since(start))
	}
	t.Logf("subscription reported lost %v after the broker stopped", time.Since(start))
}

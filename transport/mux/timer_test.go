package mux

import (
	"context"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/felixmq/felix/transport"
)

func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cli := Client(a, transport.Config{MaxIdleTimeout: time.Second})
		srv := Server(b, transport.Config{MaxIdleTimeout: time.Hour})
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if cli.Err() != nil {
			t.Fatalf("closed before the idle timeout: %v", cli.Err())
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if err := context.Cause(cli.Context()); !errors.Is(err, transport.ErrIdleTimeout) {
			t.Fatalf("client ended with %v, want the idle timeout", err)
		}
		if err := context.Cause(srv.Context()); !errors.Is(err, transport.ErrConnectionLost) {
			t.Fatalf("server ended with %v, want connection lost", err)
		}
		cli.CloseWithError(0, "")
		srv.CloseWithError(0, "")
	})
}

func TestKeepAliveHoldsIdleSessionOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		cli := Client(a, transport.Config{MaxIdleTimeout: time.Second, KeepAlive: 300 * time.Millisecond})
		srv := Server(b, transport.Config{MaxIdleTimeout: time.Second})
		time.Sleep(time.Minute)
		synctest.Wait()
		if cli.Err() != nil || srv.Err() != nil {
			t.Fatalf("an idle session with keep-alive ended: client %v, server %v", cli.Err(), srv.Err())
		}
		cli.CloseWithError(0, "")
		srv.CloseWithError(0, "")
	})
}

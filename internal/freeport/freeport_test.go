package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPickReturnsAPortFreeOnBothAndBelowTheEphemeralRange(t *testing.T) {
	lo, hi := quietRange()
	for range 20 {
		port, err := Pick(true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if hi > lo && (port < lo || port >= hi) {
			t.Fatalf("port %d outside [%d, %d)", port, lo, hi)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d is not free on TCP: %v", port, err)
		}
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			ln.Close()
			t.Fatalf("port %d is not free on UDP: %v", port, err)
		}
		pc.Close()
		ln.Close()
	}
}

func TestPickSkipsWhatItIsToldToAndABoundPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bound := ln.Addr().(*net.TCPAddr).Port
	if Free(false, bound) {
		t.Fatalf("port %d is bound, yet reported free", bound)
	}
	seen := map[int]bool{}
	for range 50 {
		port, err := Pick(false, func(p int) bool { return seen[p] })
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] || port == bound {
			t.Fatalf("port %d handed out twice or bound", port)
		}
		seen[port] = true
	}
}

// Package freeport picks loopback ports for processes that are told
// their port rather than binding port 0 themselves: felix dev's nodes and
// the end-to-end tests' brokers.
//
// A port the kernel hands out for port 0 comes from its ephemeral range,
// the same range it takes outgoing connections' source ports from, so on
// a busy machine a connection can take such a port between the check and
// the child's bind. Ports are therefore picked at random below that range
// first, and only then from the kernel.
package freeport

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"

	"math/rand/v2"
)

// floor is the lowest port picked, above the registered services most
// machines run.
const floor = 20000

// Pick returns a loopback port free on TCP (and on UDP too when both)
// that skip does not reject. skip may be nil.
func Pick(both bool, skip func(port int) bool) (int, error) {
	if lo, hi := quietRange(); hi > lo {
		for range 200 {
			port := lo + rand.IntN(hi-lo)
			if (skip == nil || !skip(port)) && Free(both, port) {
				return port, nil
			}
		}
	}
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if (skip == nil || !skip(port)) && (!both || udpFree(port)) {
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port")
}

// Free reports whether port is free on loopback TCP, and on UDP too when
// both, by binding it a moment.
func Free(both bool, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	defer ln.Close()
	return !both || udpFree(port)
}

func udpFree(port int) bool {
	c, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// quietRange is [floor, start of the ephemeral range): Linux's
// /proc/sys/net/ipv4/ip_local_port_range, or 32768 where it cannot be
// read (below Linux's default and macOS's 49152). Empty when the
// ephemeral range starts lower.
func quietRange() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				hi = n
			}
		}
	}
	return floor, hi
}

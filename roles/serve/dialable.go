package serve

import (
	"net"
	"net/url"
)

// dialable turns a listener's address into one a client on this machine
// can dial: a listener bound to every interface (0.0.0.0 or ::, as in a
// container) is reached through 127.0.0.1 on the same port. Anything
// else is returned as it is.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// dialableURL is dialable for the host of a URL.
func dialableURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	u.Host = dialable(u.Host)
	return u.String()
}

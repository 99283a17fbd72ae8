package serve

import "testing"

// TestClientFileAddressesAreDialable: client.json never names an address
// a client cannot dial, such as the [::] a container's listener binds.
func TestClientFileAddressesAreDialable(t *testing.T) {
	for in, want := range map[string]string{
		"[::]:5000":         "127.0.0.1:5000",
		"0.0.0.0:5000":      "127.0.0.1:5000",
		":5000":             "127.0.0.1:5000",
		"127.0.0.1:5000":    "127.0.0.1:5000",
		"10.1.2.3:5000":     "10.1.2.3:5000",
		"broker.local:5000": "broker.local:5000",
		"not an address":    "not an address",
	} {
		if got := dialable(in); got != want {
			t.Errorf("dialable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := dialableURL("http://[::]:5080"); got != "http://127.0.0.1:5080" {
		t.Errorf("dialableURL = %q", got)
	}
	if got := dialableURL("https://cp.example:5080"); got != "https://cp.example:5080" {
		t.Errorf("dialableURL kept %q", got)
	}
}

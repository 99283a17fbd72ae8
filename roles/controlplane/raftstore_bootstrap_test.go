package controlplane

import (
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/core/auth"
)

// Three members starting at once agree on one signing key and bootstrap
// the catalog exactly once.
func TestBootstrapExactlyOnceAcrossMembers(t *testing.T) {
	g := openTestGroup(t, 3)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		tokens  []string
	)
	for id := uint64(1); id <= 3; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc, err := New(Config{Logger: quietLogger()}, g.stores[id])
			if err != nil {
				t.Error(err)
				return
			}
			ok, err := svc.Bootstrap(bg)
			if err != nil {
				t.Error(err)
				return
			}
			tok, err := svc.MintToken(auth.Claims{Subject: "a", TenantID: "default", Perms: []string{"*:*"}, Expiry: time.Now().Add(time.Hour)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				created++
			}
			tokens = append(tokens, tok)
		}()
	}
	wg.Wait()
	kids := map[string]bool{}
	for _, tok := range tokens {
		kids[tokenKID(t, tok)] = true
	}
	if len(tokens) != 3 || created != 1 || len(kids) != 1 {
		t.Fatalf("%d members bootstrapped and %d signing keys exist; want 1 and 1", created, len(kids))
	}
	ts, err := g.stores[2].Tenants(bg)
	must(t, err)
	if len(ts) != 1 || ts[0].TenantID != "default" {
		t.Fatalf("tenants = %+v", ts)
	}
}

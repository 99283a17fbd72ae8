package controlplane

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/felixmq/felix/wire"
)

// Concurrent creates each get one distinct, gap-free sequence number and
// exactly one of two racing creates of the same name wins.
func TestConcurrentMutations(t *testing.T) {
	h := newHarness(t)
	const n = 16
	var wg sync.WaitGroup
	codes := make([]int, 2*n)
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.NewReader(fmt.Sprintf(`{"stream":"s%d"}`, i%n))
			req, _ := http.NewRequest("POST", h.srv.URL+"/v1/tenants/default/namespaces/default/streams", body)
			req.Header.Set("Authorization", "Bearer "+h.admin)
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	created, conflicts := 0, 0
	for _, c := range codes {
		switch c {
		case 201:
			created++
		case 409:
			conflicts++
		default:
			t.Fatalf("unexpected status %d", c)
		}
	}
	if created != n || conflicts != n {
		t.Fatalf("created %d, conflicts %d; want %d each", created, conflicts, n)
	}
	p, err := h.svc.Changes(bg, wire.KindStreams, 0)
	must(t, err)
	if len(p.Items) != n {
		t.Fatalf("%d changes, want %d", len(p.Items), n)
	}
	for i, it := range p.Items {
		if it.Seq != uint64(i+1) {
			t.Fatalf("change %d has seq %d", i, it.Seq)
		}
	}
}

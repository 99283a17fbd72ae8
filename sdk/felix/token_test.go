package felix

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRefreshingTokenSharesOneRefresh(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var calls atomic.Int32
	release := make(chan struct{})
	rt := NewRefreshingToken("", time.Time{}, func(ctx context.Context) (string, time.Time, error) {
		n := calls.Add(1)
		<-release
		return "tok-" + strconv.Itoa(int(n)), now.Add(time.Hour), nil
	})
	rt.now = func() time.Time { return now }
	var wg sync.WaitGroup
	got := make([]string, 5)
	for i := range got {
		wg.Go(func() {
			tok, err := rt.Token(context.Background())
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		})
	}
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond) // wait until one refresh is running
	}
	close(release)
	wg.Wait()
	for _, g := range got {
		if g != "tok-1" {
			t.Fatalf("tokens %v: want all tok-1", got)
		}
	}
	// Valid until a minute before expiry, then renewed.
	now = now.Add(58 * time.Minute)
	if tok, _ := rt.Token(context.Background()); tok != "tok-1" || calls.Load() != 1 {
		t.Fatalf("early refresh: %s after %d calls", tok, calls.Load())
	}
	now = now.Add(time.Minute + time.Second)
	if tok, _ := rt.Token(context.Background()); tok != "tok-2" {
		t.Fatalf("no refresh near expiry: %s", tok)
	}
}

func TestRefreshingTokenError(t *testing.T) {
	fail := true
	rt := NewRefreshingToken("", time.Time{}, func(context.Context) (string, time.Time, error) {
		if fail {
			return "", time.Time{}, errors.New("boom")
		}
		return "ok", time.Now().Add(time.Hour), nil
	})
	if _, err := rt.Token(context.Background()); err == nil {
		t.Fatal("refresh error not reported")
	}
	fail = false
	if tok, err := rt.Token(context.Background()); err != nil || tok != "ok" {
		t.Fatalf("retry after error: %q %v", tok, err)
	}
}

func TestControlPlaneRefresherKeepsNewestRefreshToken(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/tenants/acme/token/refresh" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			RefreshToken string `json:"refresh_token"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		seen = append(seen, req.RefreshToken)
		if req.RefreshToken == "bad" {
			w.WriteHeader(401)
			w.Write([]byte(`{"error":{"code":"unauthorized","message":"unknown refresh token"}}`))
			return
		}
		n := strconv.Itoa(len(seen))
		json.NewEncoder(w).Encode(map[string]string{"token": "t" + n, "refresh_token": "r" + n,
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}))
	defer srv.Close()
	f := ControlPlaneRefresher(srv.Client(), srv.URL, "acme", "r0")
	for i := 1; i <= 2; i++ {
		tok, exp, err := f(context.Background())
		if err != nil || tok != "t"+strconv.Itoa(i) || time.Until(exp) < 50*time.Minute {
			t.Fatalf("refresh %d: %q %v %v", i, tok, exp, err)
		}
	}
	if seen[0] != "r0" || seen[1] != "r1" {
		t.Fatalf("refresh tokens sent: %v", seen)
	}
	if _, _, err := ControlPlaneRefresher(srv.Client(), srv.URL, "acme", "bad")(context.Background()); err == nil {
		t.Fatal("refused refresh not reported")
	}
}

package felix

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// RefreshFunc obtains a fresh Felix token and the time it expires.
type RefreshFunc func(ctx context.Context) (token string, expiresAt time.Time, err error)

// DefaultRefreshEarly is how long before its expiry a RefreshingToken
// replaces its token.
const DefaultRefreshEarly = time.Minute

// RefreshingToken is a TokenProvider that renews its token shortly before
// it expires. Concurrent callers share one refresh at a time, so a refresh
// token chain is used from one place (see ControlPlaneRefresher). A failed
// refresh fails the calls that waited for it; the next call tries again.
// It is safe for concurrent use.
type RefreshingToken struct {
	refresh RefreshFunc
	early   time.Duration
	now     func() time.Time

	mu     sync.Mutex
	token  string
	exp    time.Time
	flight chan struct{} // closed when the running refresh ends; nil when none runs
	err    error         // outcome of the last refresh
}

// NewRefreshingToken returns a provider starting with token (may be empty)
// valid until expiresAt, renewed with refresh DefaultRefreshEarly before
// it expires.
func NewRefreshingToken(token string, expiresAt time.Time, refresh RefreshFunc) *RefreshingToken {
	return &RefreshingToken{refresh: refresh, early: DefaultRefreshEarly, now: time.Now, token: token, exp: expiresAt}
}

// Token returns a token valid for at least the refresh margin, refreshing
// first when needed.
func (r *RefreshingToken) Token(ctx context.Context) (string, error) {
	for {
		r.mu.Lock()
		if r.token != "" && r.now().Before(r.exp.Add(-r.early)) {
			tok := r.token
			r.mu.Unlock()
			return tok, nil
		}
		if r.flight != nil {
			wait := r.flight
			r.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			r.mu.Lock()
			err := r.err
			r.mu.Unlock()
			if err != nil {
				return "", err
			}
			continue
		}
		done := make(chan struct{})
		r.flight = done
		r.mu.Unlock()

		tok, exp, err := r.refresh(ctx)
		r.mu.Lock()
		if err == nil && tok == "" {
			err = fmt.Errorf("felix: token refresh returned no token")
		}
		if err == nil {
			r.token, r.exp = tok, exp
		}
		r.err, r.flight = err, nil
		close(done)
		r.mu.Unlock()
		if err != nil {
			return "", err
		}
		return tok, nil
	}
}

// maxRefreshAnswer bounds the control plane's answer to a refresh.
const maxRefreshAnswer = 1 << 20

// ControlPlaneRefresher returns a RefreshFunc that trades refreshToken at
// the control plane (POST /v1/tenants/{tenant}/token/refresh) and keeps
// the newest refresh token of the chain for the next call. Use it from
// one RefreshingToken only: the control plane revokes a chain whose old
// refresh token is used again after its reuse grace. hc nil means
// http.DefaultClient; baseURL is the control plane, e.g.
// "https://cp.example.com:8443".
func ControlPlaneRefresher(hc *http.Client, baseURL, tenant, refreshToken string) RefreshFunc {
	if hc == nil {
		hc = http.DefaultClient
	}
	var mu sync.Mutex
	endpoint := strings.TrimRight(baseURL, "/") + "/v1/tenants/" + url.PathEscape(tenant) + "/token/refresh"
	return func(ctx context.Context) (string, time.Time, error) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := json.Marshal(map[string]string{"refresh_token": refreshToken})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return "", time.Time{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("felix: token refresh: %w", err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRefreshAnswer))
		if err != nil {
			return "", time.Time{}, fmt.Errorf("felix: token refresh: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			var e struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			json.Unmarshal(raw, &e)
			return "", time.Time{}, fmt.Errorf("felix: token refresh: HTTP %d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		var out struct {
			Token        string `json:"token"`
			ExpiresAt    string `json:"expires_at"`
			RefreshToken string `json:"refresh_token"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return "", time.Time{}, fmt.Errorf("felix: token refresh answer: %w", err)
		}
		exp, err := time.Parse(time.RFC3339, out.ExpiresAt)
		if err != nil || out.Token == "" || out.RefreshToken == "" {
			return "", time.Time{}, fmt.Errorf("felix: token refresh answer lacks token, expires_at or refresh_token")
		}
		refreshToken = out.RefreshToken
		return out.Token, exp, nil
	}
}

package catalogsync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// Source serves the catalog feeds and the JWKS.
type Source interface {
	// Snapshot returns every live resource of kind with the cursor to
	// continue from.
	Snapshot(ctx context.Context, kind wire.CatalogKind) (*wire.CatalogPage, error)
	// Changes returns the changes of kind after cursor since, oldest
	// first, or a page with Reset set when they are no longer kept.
	Changes(ctx context.Context, kind wire.CatalogKind, since uint64) (*wire.CatalogPage, error)
	// JWKS returns the JSON Web Key Set tokens are signed with.
	JWKS(ctx context.Context) ([]byte, error)
}

// MaxResponseBytes bounds a control plane response body.
const MaxResponseBytes = 64 << 20

// defaultHTTPTimeout applies when NewHTTPSource gets no client.
const defaultHTTPTimeout = 30 * time.Second

type httpSource struct {
	bases   []string // control plane members, at least one
	cur     atomic.Uint32
	token   func() string
	client  *http.Client
	maxBody int64 // MaxResponseBytes; tests lower it
}

// NewHTTPSource returns a Source reading the control plane at baseURL
// (for example "http://127.0.0.1:5080"). baseURL may list several members
// separated by commas; see NewHTTPSourceMulti. Every request carries
// "Authorization: Bearer <token()>" when token is non-nil and returns a
// non-empty string. A nil client means one with a 30s timeout.
func NewHTTPSource(baseURL string, token func() string, client *http.Client) Source {
	return NewHTTPSourceMulti(SplitURLs(baseURL), token, client)
}

// NewHTTPSourceMulti returns a Source reading a control plane of several
// members. Requests go to the member that last answered; a connection
// error or a 5xx answer moves on to the next member, each member being
// tried at most once per request. Empty entries are ignored; with none
// left the source uses "http://127.0.0.1:5080".
func NewHTTPSourceMulti(baseURLs []string, token func() string, client *http.Client) Source {
	if client == nil {
		client = &http.Client{Timeout: defaultHTTPTimeout}
	}
	var bases []string
	for _, u := range baseURLs {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			bases = append(bases, u)
		}
	}
	if len(bases) == 0 {
		bases = []string{defaultBaseURL}
	}
	return &httpSource{bases: bases, token: token, client: client, maxBody: MaxResponseBytes}
}

// defaultBaseURL is the control plane a source without URLs reads.
const defaultBaseURL = "http://127.0.0.1:5080"

// SplitURLs splits a comma-separated list of URLs (FELIX_CONTROLPLANE_URL),
// trimming spaces and dropping empty entries.
func SplitURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

func (h *httpSource) Snapshot(ctx context.Context, kind wire.CatalogKind) (*wire.CatalogPage, error) {
	return h.page(ctx, kind, "/v1/catalog/"+url.PathEscape(string(kind))+"/snapshot")
}

func (h *httpSource) Changes(ctx context.Context, kind wire.CatalogKind, since uint64) (*wire.CatalogPage, error) {
	path := "/v1/catalog/" + url.PathEscape(string(kind)) + "/changes?since=" + strconv.FormatUint(since, 10)
	return h.page(ctx, kind, path)
}

func (h *httpSource) JWKS(ctx context.Context) ([]byte, error) {
	return h.get(ctx, "/v1/jwks")
}

// page fetches and decodes one catalog page of kind.
func (h *httpSource) page(ctx context.Context, kind wire.CatalogKind, path string) (*wire.CatalogPage, error) {
	b, err := h.get(ctx, path)
	if err != nil {
		return nil, err
	}
	var p wire.CatalogPage
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("catalogsync: GET %s: decode page: %w", path, err)
	}
	if p.Kind != "" && p.Kind != kind {
		return nil, fmt.Errorf("catalogsync: GET %s: page of kind %q, want %q", path, p.Kind, kind)
	}
	p.Kind = kind
	return &p, nil
}

// get performs one authenticated GET and returns the body of a 2xx answer,
// failing over between members on connection errors and 5xx answers.
func (h *httpSource) get(ctx context.Context, path string) ([]byte, error) {
	return h.call(ctx, http.MethodGet, path, nil)
}

// call is get for any method, with an optional JSON body.
func (h *httpSource) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	b, _, err := h.callStatus(ctx, method, path, body)
	return b, err
}

// callStatus is call that also returns the status of a successful
// answer (2xx, or 304 with no body).
func (h *httpSource) callStatus(ctx context.Context, method, path string, body []byte) ([]byte, int, error) {
	start := h.cur.Load()
	var err error
	for i := range uint32(len(h.bases)) {
		idx := (start + i) % uint32(len(h.bases))
		var b []byte
		var status int
		b, status, err = h.do(ctx, method, h.bases[idx], path, body)
		if err == nil {
			if idx != start {
				h.cur.CompareAndSwap(start, idx)
			}
			return b, status, nil
		}
		if ctx.Err() != nil || (status != 0 && status < 500) {
			return nil, status, err
		}
	}
	return nil, 0, err
}

// do is one request; status is 0 when no answer arrived.
func (h *httpSource) do(ctx context.Context, method, base, path string, body []byte) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("catalogsync: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != nil {
		if tok := h.token(); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("catalogsync: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, h.maxBody+1))
	if err != nil {
		return nil, 0, fmt.Errorf("catalogsync: %s %s: read body: %w", method, path, err)
	}
	if int64(len(b)) > h.maxBody {
		return nil, resp.StatusCode, fmt.Errorf("catalogsync: %s %s: response larger than %d bytes", method, path, h.maxBody)
	}
	if resp.StatusCode == http.StatusNotModified {
		return nil, resp.StatusCode, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, resp.StatusCode, &StatusError{Status: resp.StatusCode,
			err: fmt.Errorf("catalogsync: %s %s: HTTP %d: %w", method, path, resp.StatusCode, errorFromBody(resp.StatusCode, b))}
	}
	return b, resp.StatusCode, nil
}

// StatusError is a non-2xx answer from the control plane. It unwraps to
// the *wire.Error the answer carried.
type StatusError struct {
	Status int // the HTTP status
	err    error
}

func (e *StatusError) Error() string { return e.err.Error() }

// Unwrap returns the error the answer described.
func (e *StatusError) Unwrap() error { return e.err }

// errorFromBody turns a control plane error answer
// {"error":{"code":...,"message":...,"retry":...}} into a *wire.Error. A
// body of another shape is quoted (shortened) in the message.
func errorFromBody(status int, b []byte) *wire.Error {
	var body struct {
		Error *struct {
			Code    wire.Code       `json:"code"`
			Message string          `json:"message"`
			Retry   wire.RetryClass `json:"retry"`
			Detail  json.RawMessage `json:"detail"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error != nil {
		e := body.Error
		return wire.ErrorFromFields(e.Code, e.Retry, e.Message, e.Detail)
	}
	const maxQuote = 256
	text := strings.TrimSpace(string(b))
	if len(text) > maxQuote {
		text = text[:maxQuote] + "..."
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return wire.NewError(codeForStatus(status), "%s", text)
}

func codeForStatus(status int) wire.Code {
	switch status {
	case http.StatusUnauthorized:
		return wire.CodeUnauthorized
	case http.StatusForbidden:
		return wire.CodeForbidden
	case http.StatusNotFound:
		return wire.CodeNotFound
	case http.StatusBadRequest:
		return wire.CodeInvalidRequest
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return wire.CodeOverloaded
	default:
		return wire.CodeInternal
	}
}

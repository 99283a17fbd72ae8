package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Limits of the admin client.
const (
	// DefaultAdminTimeout bounds each control plane request.
	DefaultAdminTimeout = 10 * time.Second
	maxResponseBytes    = 16 << 20 // a larger answer is refused, not buffered
	maxErrorBodyBytes   = 64 << 10
)

// codeConflict is the HTTP-only code for creating what already exists.
const codeConflict = "conflict"

// APIError is a refusal from the control plane's REST API.
type APIError struct {
	Status  int    // HTTP status
	Code    string // "not_found", "conflict", "forbidden", ...
	Retry   string // retry class when the server sent one
	Message string
	Reason  string // the detail's reason when the server sent one
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status)
}

// AdminClient talks to the control plane's REST API with a bearer token.
type AdminClient struct {
	base  *url.URL
	more  []*url.URL // the cluster's other control planes, tried when base cannot be dialled
	token string
	http  *http.Client
}

// NewAdminClient builds a client for s.ControlPlane authenticated with
// s.Token. An https URL is verified against s.CAFile when set (else the
// system roots). A URL without a scheme is taken as http.
func NewAdminClient(s Settings) (*AdminClient, error) {
	if err := s.needControlPlane(); err != nil {
		return nil, err
	}
	if err := s.needToken(); err != nil {
		return nil, err
	}
	u, err := parseControlPlaneURL(s.ControlPlane)
	if err != nil {
		return nil, err
	}
	var more []*url.URL
	for _, raw := range s.MoreControlPlanes {
		m, err := parseControlPlaneURL(raw)
		if err != nil {
			return nil, err
		}
		more = append(more, m)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if s.ConnectTimeout > 0 { // --connect-timeout bounds the TCP and TLS set-up
		tr.DialContext = (&net.Dialer{Timeout: s.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		tr.TLSHandshakeTimeout = s.ConnectTimeout
	}
	if u.Scheme == "https" && s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", s.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &AdminClient{base: u, more: more, token: s.Token, http: &http.Client{Transport: tr, Timeout: DefaultAdminTimeout}}, nil
}

func parseControlPlaneURL(raw string) (*url.URL, error) {
	full := raw
	if !strings.Contains(full, "://") {
		full = "http://" + full
	}
	u, err := url.Parse(full)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("control plane URL %q: want http(s)://HOST:PORT", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

// send sends req's method, path and body to the control plane, moving on
// to the cluster's next control plane (and staying there) when this one
// cannot be dialled: the request was never sent, so even a write is safe
// to send again.
func (a *AdminClient) send(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Response, error) {
	for {
		u := *a.base
		u.Path += path
		u.RawQuery = query.Encode()
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := a.http.Do(req)
		var op *net.OpError
		if err != nil && len(a.more) > 0 && errors.As(err, &op) && op.Op == "dial" && ctx.Err() == nil {
			a.base, a.more = a.more[0], a.more[1:]
			continue
		}
		return resp, err
	}
}

// Close releases idle connections.
func (a *AdminClient) Close() { a.http.CloseIdleConnections() }

// path joins escaped segments under /v1.
func apiPath(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// do sends one request; in (when not nil) is the JSON body, and a 2xx
// answer's body is decoded into out (when not nil and the body is not
// empty). Other answers become *APIError.
func (a *AdminClient) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	resp, err := a.send(ctx, method, path, query, body)
	if err != nil {
		return fmt.Errorf("control plane %s: %w", a.base.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeAPIError(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("control plane %s: read answer: %w", a.base.Host, err)
	}
	if len(b) > maxResponseBytes {
		return fmt.Errorf("control plane answer is larger than %d bytes", maxResponseBytes)
	}
	if out == nil || len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("control plane answer to %s %s: %w", method, path, err)
	}
	return nil
}

// decodeAPIError reads {"error":{"code","message","retry"}}; a body that
// is not in that shape still yields a code chosen from the HTTP status.
func decodeAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Retry   string `json:"retry"`
			Detail  struct {
				Reason string `json:"reason"`
			} `json:"detail"`
		} `json:"error"`
	}
	e := &APIError{Status: resp.StatusCode}
	if json.Unmarshal(b, &env) == nil && env.Error.Code != "" {
		e.Code, e.Message, e.Retry = env.Error.Code, env.Error.Message, env.Error.Retry
		e.Reason = env.Error.Detail.Reason
	} else {
		e.Code = codeForStatus(resp.StatusCode)
		e.Message = strings.TrimSpace(string(b))
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return codeConflict
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "invalid_request"
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return "overloaded"
	default:
		return "internal"
	}
}

// decodeList accepts a list answer either as a bare JSON array or as an
// object holding the array (under key, "items", or its only array field).
func decodeList[T any](raw json.RawMessage, key string) ([]T, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '[' {
		var out []T
		return out, json.Unmarshal(raw, &out)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	for _, k := range []string{key, "items"} {
		if v, ok := obj[k]; ok {
			return decodeList[T](v, "")
		}
	}
	for _, v := range obj {
		if v = bytes.TrimSpace(v); len(v) > 0 && v[0] == '[' {
			return decodeList[T](v, "")
		}
	}
	return nil, fmt.Errorf("list answer holds no array")
}

// list GETs path and decodes the list found under key.
func list[T any](ctx context.Context, a *AdminClient, path, key string) ([]T, error) {
	var raw json.RawMessage
	if err := a.do(ctx, http.MethodGet, path, nil, nil, &raw); err != nil {
		return nil, err
	}
	out, err := decodeList[T](raw, key)
	if err != nil {
		return nil, fmt.Errorf("control plane answer to GET %s: %w", path, err)
	}
	return out, nil
}

// create POSTs in to path and returns what the server stored (in itself
// when the answer has no body).
func create[T any](ctx context.Context, a *AdminClient, path string, in T) (T, error) {
	out := in
	err := a.do(ctx, http.MethodPost, path, nil, in, &out)
	return out, err
}

func get[T any](ctx context.Context, a *AdminClient, path string) (T, error) {
	var out T
	err := a.do(ctx, http.MethodGet, path, nil, nil, &out)
	return out, err
}

func (a *AdminClient) delete(ctx context.Context, path string, recursive bool) error {
	var q url.Values
	if recursive {
		q = url.Values{"recursive": {"true"}}
	}
	return a.do(ctx, http.MethodDelete, path, q, nil, nil)
}

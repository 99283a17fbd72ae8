package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// adminAPI is the little of the control plane's REST API a benchmark needs:
// creating and deleting its own uniquely named streams and caches.
type adminAPI struct {
	base   string
	tenant string
	token  string
	http   *http.Client
}

func (a *adminAPI) do(ctx context.Context, method, path string, body any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(a.base, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

func uniqueName(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func (a *adminAPI) nsPath(ns string) string {
	return "/v1/tenants/" + url.PathEscape(a.tenant) + "/namespaces/" + url.PathEscape(ns)
}

// streamSpec is what a benchmark asks of the stream it creates.
type streamSpec struct {
	policy  string // subscriber queue policy; "" is the broker's default
	shards  int
	durable bool
	repl    replication // copies and ack consistency; zero: the control plane's defaults
}

func (a *adminAPI) createStream(ctx context.Context, ns, prefix string, spec streamSpec) (string, error) {
	name := uniqueName(prefix)
	return name, a.createNamedStream(ctx, ns, name, spec)
}

func (a *adminAPI) createNamedStream(ctx context.Context, ns, name string, spec streamSpec) error {
	body := map[string]any{"stream": name, "shards": max(1, spec.shards)}
	if spec.policy != "" {
		body["sub_queue_policy"] = spec.policy
	}
	if spec.durable {
		body["durable"] = true
	}
	spec.repl.addTo(body)
	return a.do(ctx, http.MethodPost, a.nsPath(ns)+"/streams", body)
}

func (a *adminAPI) deleteStream(ctx context.Context, ns, name string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a.do(ctx, http.MethodDelete, a.nsPath(ns)+"/streams/"+url.PathEscape(name), nil)
}

func (a *adminAPI) createCache(ctx context.Context, ns, prefix string) (string, error) {
	name := uniqueName(prefix)
	return name, a.do(ctx, http.MethodPost, a.nsPath(ns)+"/caches", map[string]any{"cache": name})
}

func (a *adminAPI) deleteCache(ctx context.Context, ns, name string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a.do(ctx, http.MethodDelete, a.nsPath(ns)+"/caches/"+url.PathEscape(name), nil)
}

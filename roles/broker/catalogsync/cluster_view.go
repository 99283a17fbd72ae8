package catalogsync

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/felixmq/felix/wire"
)

// ClusterView fetches the cluster view a broker routes by: GET
// /v1/cluster/view?known=TAG, with the same token and failover as the
// feeds. A 304 answer (known is current) is changed=false and an empty
// view. It makes the HTTP source a broker.ClusterViewSource.
func (h *httpSource) ClusterView(ctx context.Context, known string) (wire.ClusterView, bool, error) {
	const path = "/v1/cluster/view"
	full := path
	if known != "" {
		full += "?known=" + url.QueryEscape(known)
	}
	b, status, err := h.callStatus(ctx, http.MethodGet, full, nil)
	if err != nil {
		return wire.ClusterView{}, false, err
	}
	if status == http.StatusNotModified {
		return wire.ClusterView{}, false, nil
	}
	var v wire.ClusterView
	if err := json.Unmarshal(b, &v); err != nil {
		return wire.ClusterView{}, false, fmt.Errorf("catalogsync: GET %s: decode the view: %w", path, err)
	}
	if v.Tag == "" {
		return wire.ClusterView{}, false, fmt.Errorf("catalogsync: GET %s: a view without a tag", path)
	}
	return v, true, nil
}

// WaitClusterViewChange holds GET
// /v1/cluster/view/changes?known=TAG&wait_ms=N open until the view's tag
// is not known (changed=true with the new tag) or the wait ends
// (changed=false). It makes the HTTP source a broker.ClusterViewWatcher.
func (h *httpSource) WaitClusterViewChange(ctx context.Context, known string, wait time.Duration) (string, bool, error) {
	const path = "/v1/cluster/view/changes"
	full := path + "?known=" + url.QueryEscape(known) + "&wait_ms=" + strconv.FormatInt(wait.Milliseconds(), 10)
	b, status, err := h.callStatus(ctx, http.MethodGet, full, nil)
	if err != nil {
		return "", false, err
	}
	if status == http.StatusNotModified {
		return "", false, nil
	}
	var v struct {
		Tag string `json:"tag"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return "", false, fmt.Errorf("catalogsync: GET %s: decode: %w", path, err)
	}
	return v.Tag, true, nil
}

package felix

import "context"

// identity is who a ClusterClient made by WithIdentity acts as, and the
// gateway whose connections it borrows.
type identity struct {
	gateway *ClusterClient
	tenant  string
	tokens  TokenProvider
}

// WithIdentity returns a ClusterClient that acts for one user over this
// one's connections: it reaches the broker the gateway is connected to
// through a Handle on the gateway's connection (opening no connection of
// its own), and follows the gateway to the next broker when that
// connection is replaced. Its calls are retried like the gateway's; its
// Close ends only its own streams; closing the gateway ends it too. On a
// ClusterClient that is itself such a handle, it makes a sibling.
func (cc *ClusterClient) WithIdentity(tenant string, tp TokenProvider) (*ClusterClient, error) {
	if tenant == "" {
		return nil, invalidArg("WithIdentity needs a tenant")
	}
	if tp == nil {
		return nil, invalidArg("WithIdentity needs a TokenProvider")
	}
	gw := cc
	if cc.id != nil {
		gw = cc.id.gateway
	}
	gw.mu.Lock()
	closed := gw.closed
	gw.mu.Unlock()
	if closed {
		return nil, notSent(ErrClosed)
	}
	cfg := gw.cfg
	cfg.Tenant, cfg.Token = tenant, ""
	return &ClusterClient{seeds: gw.seeds, cfg: cfg, curIdx: -1, resumeBase: gw.resumeBase, resumeMax: gw.resumeMax,
		id: &identity{gateway: gw, tenant: tenant, tokens: tp}}, nil
}

// WithIdentityToken is WithIdentity with a fixed token.
func (cc *ClusterClient) WithIdentityToken(tenant, token string) (*ClusterClient, error) {
	if token == "" {
		return nil, invalidArg("WithIdentityToken needs a token")
	}
	return cc.WithIdentity(tenant, StaticToken(token))
}

// handleClient returns the user's client on the gateway's live
// connection, making a new one when the gateway moved to another.
func (cc *ClusterClient) handleClient(ctx context.Context) (*Client, error) {
	g, err := cc.id.gateway.client(ctx)
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return nil, notSent(ErrClosed)
	}
	if cc.cur != nil && cc.cur.parent == g && !cc.cur.dead() {
		return cc.cur, nil
	}
	if old := cc.cur; old != nil {
		cc.cur = nil
		old.shutdown(ErrSubscriptionLost)
	}
	h, err := g.WithIdentity(cc.id.tenant, cc.id.tokens)
	if err != nil {
		return nil, err
	}
	cc.cur = h.Client
	cc.curIdx = cc.id.gateway.currentIndex()
	cc.features.Store(g.ServerFeatures())
	return cc.cur, nil
}

// currentIndex is the seed index of the gateway's connection.
func (cc *ClusterClient) currentIndex() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.curIdx
}

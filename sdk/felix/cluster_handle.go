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
// one's connections: it reaches the brokers the gateway is connected to
// through a Handle on the gateway's connection (opening no connection of
// its own), and follows the gateway to the next broker when that
// connection is replaced. Its calls are retried like the gateway's and go
// through the gateway's entry broker, which forwards them to the owners;
// a subscribe answered not_leader follows the redirect on the gateway's
// connection to that broker. Its Close ends only its own streams; closing
// the gateway ends it too. On a ClusterClient that is itself such a
// handle, it makes a sibling.
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
	id := &identity{gateway: gw, tenant: tenant, tokens: tp}
	h := newClusterClient(gw.seeds, cfg, id)
	h.resumeBase, h.resumeMax = gw.resumeBase, gw.resumeMax
	return h, nil
}

// WithIdentityToken is WithIdentity with a fixed token.
func (cc *ClusterClient) WithIdentityToken(tenant, token string) (*ClusterClient, error) {
	if token == "" {
		return nil, invalidArg("WithIdentityToken needs a token")
	}
	return cc.WithIdentity(tenant, StaticToken(token))
}

// handleClient returns the user's client on the gateway's live entry
// connection, making a new one when the gateway moved to another.
func (cc *ClusterClient) handleClient(ctx context.Context) (*Client, error) {
	g, err := cc.id.gateway.client(ctx)
	if err != nil {
		return nil, err
	}
	h, err := cc.handleOn(g)
	if err != nil {
		return nil, err
	}
	addr := cc.id.gateway.Addr()
	cc.mu.Lock()
	cc.cur, cc.curAddr = h, addr
	cc.mu.Unlock()
	cc.features.Store(g.ServerFeatures())
	return h, nil
}

// handleOn returns the user's client on the gateway connection g, one
// per connection.
func (cc *ClusterClient) handleOn(g *Client) (*Client, error) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return nil, notSent(ErrClosed)
	}
	if h := cc.handles[g]; h != nil && !h.dead() {
		cc.mu.Unlock()
		return h, nil
	}
	var dead []*Client
	for parent, h := range cc.handles {
		if h.dead() || parent.dead() {
			delete(cc.handles, parent)
			dead = append(dead, h)
		}
	}
	h, err := g.WithIdentity(cc.id.tenant, cc.id.tokens)
	if err == nil {
		cc.handles[g] = h.Client
	}
	cc.mu.Unlock()
	for _, d := range dead { // never under mu: shutdown waits for the handle's goroutines
		d.shutdown(ErrSubscriptionLost)
	}
	if err != nil {
		return nil, err
	}
	return h.Client, nil
}

// invalidateHandle drops an identity's client c whose connection failed,
// and tells the gateway its connection is gone.
func (cc *ClusterClient) invalidateHandle(c *Client) {
	dropped := cc.drop(c, func() bool {
		found := cc.handles[c.parent] == c
		if found {
			delete(cc.handles, c.parent)
		}
		return found
	})
	if dropped {
		cc.id.gateway.invalidate(c.parent) // the connection they share is gone
	}
}

// clientAt returns a live client on the connection to addr: the
// gateway's own, or an identity's handle on it.
func (cc *ClusterClient) clientAt(ctx context.Context, addr string) (*Client, error) {
	if cc.id == nil {
		return cc.connTo(ctx, addr)
	}
	g, err := cc.id.gateway.connTo(ctx, addr)
	if err != nil {
		return nil, err
	}
	return cc.handleOn(g)
}

package felix

import (
	"context"
)

// TokenProvider supplies the Felix token a stream authenticates with. It
// is called once for every stream opened on its behalf (not per request),
// so a provider that refreshes its token keeps new streams working after
// the old token expires. It must be safe for concurrent use.
type TokenProvider interface {
	// Token returns the token to present now, or an error that fails
	// the call that needed a stream (nothing was sent).
	Token(ctx context.Context) (string, error)
}

// StaticToken is a TokenProvider that always returns the same token.
type StaticToken string

// Token returns the token.
func (t StaticToken) Token(context.Context) (string, error) { return string(t), nil }

// Handle acts for one user over a Client's connection: every stream it
// opens authenticates with the user's tenant and token, so the broker
// checks each request against that user's grants. It opens no connection
// of its own, and at most one publish stream and one cache stream (when
// first needed), plus one stream per subscription.
//
// A Handle has the Client's methods (Publish*, Subscribe*, Cache*, Read,
// OffsetForTime, Finish, Close, ...), acting as its user. Close ends only
// the handle's streams and subscriptions. When the broker revokes the
// user, the handle's subscriptions end and its calls fail with a
// *BrokerError of code revoked, while the gateway Client and other
// handles keep working. Closing the Client closes its handles.
type Handle struct {
	*Client
}

// WithIdentity returns a Handle acting as tenant with tokens from tp. On a
// Handle it makes a sibling handle over the same connection.
func (c *Client) WithIdentity(tenant string, tp TokenProvider) (*Handle, error) {
	if tenant == "" {
		return nil, invalidArg("WithIdentity needs a tenant")
	}
	if tp == nil {
		return nil, invalidArg("WithIdentity needs a TokenProvider")
	}
	root := c
	for root.parent != nil {
		root = root.parent
	}
	if err := root.checkUsable(); err != nil {
		return nil, err
	}
	kid := root.derive(tenant, tp)
	if !root.adopt(kid) {
		kid.shutdown(ErrClosed)
		return nil, notSent(ErrClosed)
	}
	kid.pub = newPublishPool(kid)
	kid.cache = newCachePool(kid, nil)
	return &Handle{Client: kid}, nil
}

// WithIdentityToken is WithIdentity with a fixed token, for a handle that
// will not outlive it.
func (c *Client) WithIdentityToken(tenant, token string) (*Handle, error) {
	if token == "" {
		return nil, invalidArg("WithIdentityToken needs a token")
	}
	return c.WithIdentity(tenant, StaticToken(token))
}

// derive returns a client sharing c's connection, event router and what
// the broker advertised, acting as tenant with tp. Its goroutines and
// streams are its own: one publish stream and one cache stream.
func (c *Client) derive(tenant string, tp TokenProvider) *Client {
	cfg := c.cfg
	cfg.Tenant, cfg.Token = tenant, ""
	cfg.PublishStreams, cfg.CacheStreams = 1, 1
	ctx, cancel := context.WithCancel(c.ctx)
	return &Client{cfg: cfg, conn: c.conn, tokens: tp, parent: c,
		serverFlags: c.serverFlags, serverFeatures: c.serverFeatures,
		ctx: ctx, cancel: cancel, closedC: make(chan struct{}),
		children: map[*Client]struct{}{}, subs: map[aborter]struct{}{}, router: c.router}
}

// adopt records kid as a handle's client, to be closed with c. It returns
// false once c is shutting down.
func (c *Client) adopt(kid *Client) bool {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.stopping {
		return false
	}
	c.children[kid] = struct{}{}
	return true
}

// forgetChild drops a closed handle's client.
func (c *Client) forgetChild(kid *Client) {
	c.closeMu.Lock()
	delete(c.children, kid)
	c.closeMu.Unlock()
}

// aborter is a subscription or cache watch: abort ends its streams when
// its client shuts down.
type aborter interface{ abort() }

// trackSub records a handle's open subscription so the handle's shutdown
// can end it (a root client's shutdown closes the connection, which ends
// them all, so it keeps no list). It returns false once the client is
// shutting down.
func (c *Client) trackSub(s aborter) bool {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.stopping {
		return false
	}
	if c.parent != nil {
		c.subs[s] = struct{}{}
	}
	return true
}

// untrackSub forgets a closed subscription.
func (c *Client) untrackSub(s aborter) {
	c.closeMu.Lock()
	delete(c.subs, s)
	c.closeMu.Unlock()
}

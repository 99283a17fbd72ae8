package felix

import "context"

// Subscribe is Client.Subscribe on the owner of the stream's shard 0,
// following a not_leader redirect, and returns a subscription that
// resumes by itself on a durable stream.
func (cc *ClusterClient) Subscribe(ctx context.Context, namespace, stream string) (*ClusterSubscription, error) {
	sub, err := openRetried(ctx, cc, streamRoute(namespace, stream, nil, 0), func(c *Client) (*Subscription, error) {
		return c.Subscribe(ctx, namespace, stream)
	})
	if err != nil {
		return nil, err
	}
	return newClusterSubscription(cc, sub, 0), nil
}

// SubscribeFrom is Client.SubscribeFrom on the owner of o.Shard,
// following a not_leader redirect, and returns a subscription that
// resumes by itself on a durable stream.
func (cc *ClusterClient) SubscribeFrom(ctx context.Context, namespace, stream string, o SubscribeOptions) (*ClusterSubscription, error) {
	sub, err := openRetried(ctx, cc, streamRoute(namespace, stream, nil, o.Shard), func(c *Client) (*Subscription, error) {
		return c.SubscribeFrom(ctx, namespace, stream, o)
	})
	if err != nil {
		return nil, err
	}
	return newClusterSubscription(cc, sub, o.Shard), nil
}

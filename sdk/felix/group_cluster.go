package felix

import (
	"context"
	"time"
)

// The group calls on ClusterClient go to the shard's owner and follow
// not_leader. A poll is sent again only when it never left the client
// (a re-sent poll would claim records the lost one may hold until their
// visibility lapses); acks, nacks, extensions and reads of a group's
// state are sent again after a reconnect, since repeating them changes
// nothing; dead-lettering, discard, redrive, seek and delete only when
// they never left the client.

// GroupPoll is Client.GroupPoll on the shard's owner.
func (cc *ClusterClient) GroupPoll(ctx context.Context, namespace, stream string, shard uint32, group string, maxRecords int, opts GroupPollOptions) (recs []GroupRecord, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), wasNotSent, func(c *Client) (err error) {
		recs, err = c.GroupPoll(ctx, namespace, stream, shard, group, maxRecords, opts)
		return err
	})
	return recs, err
}

// GroupAck is Client.GroupAck on the shard's owner.
func (cc *ClusterClient) GroupAck(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error {
	return cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), always, func(c *Client) error {
		return c.GroupAck(ctx, namespace, stream, shard, group, offset)
	})
}

// GroupNack is Client.GroupNack on the shard's owner.
func (cc *ClusterClient) GroupNack(ctx context.Context, namespace, stream string, shard uint32, group string, rec GroupRecord, delay time.Duration) error {
	return cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), always, func(c *Client) error {
		return c.GroupNack(ctx, namespace, stream, shard, group, rec, delay)
	})
}

// GroupExtend is Client.GroupExtend on the shard's owner.
func (cc *ClusterClient) GroupExtend(ctx context.Context, namespace, stream string, shard uint32, group string, rec GroupRecord, extend time.Duration) (granted time.Duration, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), always, func(c *Client) (err error) {
		granted, err = c.GroupExtend(ctx, namespace, stream, shard, group, rec, extend)
		return err
	})
	return granted, err
}

// GroupDeadLetter is Client.GroupDeadLetter on the shard's owner.
func (cc *ClusterClient) GroupDeadLetter(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error {
	return cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), wasNotSent, func(c *Client) error {
		return c.GroupDeadLetter(ctx, namespace, stream, shard, group, offset)
	})
}

// GroupDeadLetters is Client.GroupDeadLetters on the shard's owner.
func (cc *ClusterClient) GroupDeadLetters(ctx context.Context, namespace, stream string, shard uint32, group string) (offs []uint64, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), always, func(c *Client) (err error) {
		offs, err = c.GroupDeadLetters(ctx, namespace, stream, shard, group)
		return err
	})
	return offs, err
}

// GroupDiscard is Client.GroupDiscard on the shard's owner.
func (cc *ClusterClient) GroupDiscard(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error {
	return cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), wasNotSent, func(c *Client) error {
		return c.GroupDiscard(ctx, namespace, stream, shard, group, offset)
	})
}

// GroupRedrive is Client.GroupRedrive on the shard's owner.
func (cc *ClusterClient) GroupRedrive(ctx context.Context, namespace, stream string, shard uint32, group string, offset uint64) error {
	return cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), wasNotSent, func(c *Client) error {
		return c.GroupRedrive(ctx, namespace, stream, shard, group, offset)
	})
}

// GroupSeek is Client.GroupSeek on the shard's owner.
func (cc *ClusterClient) GroupSeek(ctx context.Context, namespace, stream string, shard uint32, group string, start GroupStart, ifNew bool) (offset uint64, moved bool, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), wasNotSent, func(c *Client) (err error) {
		offset, moved, err = c.GroupSeek(ctx, namespace, stream, shard, group, start, ifNew)
		return err
	})
	return offset, moved, err
}

// GroupCreate is Client.GroupCreate on the shard's owner.
func (cc *ClusterClient) GroupCreate(ctx context.Context, namespace, stream string, shard uint32, group string, start GroupStart) (offset uint64, created bool, err error) {
	return cc.GroupSeek(ctx, namespace, stream, shard, group, start, true)
}

// GroupDescribe is Client.GroupDescribe on the shard's owner.
func (cc *ClusterClient) GroupDescribe(ctx context.Context, namespace, stream string, shard uint32, group string) (info GroupInfo, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), always, func(c *Client) (err error) {
		info, err = c.GroupDescribe(ctx, namespace, stream, shard, group)
		return err
	})
	return info, err
}

// GroupDelete is Client.GroupDelete on the shard's owner.
func (cc *ClusterClient) GroupDelete(ctx context.Context, namespace, stream string, shard uint32, group string) (existed bool, err error) {
	err = cc.doRouted(ctx, streamRoute(namespace, stream, nil, shard), wasNotSent, func(c *Client) (err error) {
		existed, err = c.GroupDelete(ctx, namespace, stream, shard, group)
		return err
	})
	return existed, err
}

package core

// ShardInfo is what a shard tells about itself for stream information
// (felix admin stream info): offsets, what its log holds, subscribers.
type ShardInfo struct {
	Index uint32
	// Durable says the shard keeps a log; Unavailable is why that log
	// did not open ("" when it did or there is none).
	Durable     bool
	Unavailable string
	// FirstOffset is the oldest offset a durable shard retains; NextOffset
	// the offset the next record gets (so NextOffset counts every record
	// published to an in-memory shard since this broker created it).
	// Invariant: FirstOffset <= NextOffset.
	FirstOffset uint64
	NextOffset  uint64
	// Records and Bytes are what a durable shard's log holds: the records
	// retained (NextOffset - FirstOffset) and the size of its segment
	// files. Both 0 on an in-memory shard.
	Records uint64
	Bytes   int64
	// Subscribers are the subscribers registered on this broker.
	Subscribers int
}

// Info returns the shard's information as of now.
func (sh *Shard) Info() ShardInfo {
	in := ShardInfo{Index: sh.index, Durable: sh.Durable(), Subscribers: sh.Subscribers()}
	in.NextOffset = sh.NextOffset()
	if sh.unavailable != nil {
		in.Unavailable = sh.unavailable.Error()
	}
	if sh.log != nil {
		in.FirstOffset = sh.StartOffset()
		in.NextOffset = max(in.NextOffset, in.FirstOffset)
		in.Records = in.NextOffset - in.FirstOffset
		in.Bytes = sh.log.Stats().Bytes
	} else {
		in.FirstOffset = in.NextOffset
	}
	return in
}

// Info returns the information of every shard of the stream, in shard
// order. A shard not open on this broker says so in Unavailable
// (ReasonNotReady), with no offsets.
func (st *Stream) Info() []ShardInfo {
	out := make([]ShardInfo, 0, len(st.shards))
	for i := range st.shards {
		if sh := st.shards[i].Load(); sh != nil {
			out = append(out, sh.Info())
			continue
		}
		out = append(out, ShardInfo{Index: uint32(i), Durable: st.durable(), Unavailable: ReasonNotReady})
	}
	return out
}

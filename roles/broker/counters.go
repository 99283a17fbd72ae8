package broker

import (
	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Counters (FEATURE_COUNTERS) are served like cache keys: a counter_add
// is authorized as a cache write and a counter_get as a cache read of
// the key, routed to the owner of the key's cache shard (forwarded
// there, forward.go), applied on the cache's counter log and answered
// once durable (serveKeyed). A forwarded add whose answer is lost is
// answered outcome_unknown and never sent again (readOnlyCacheOp).

func (cs *controlStream) handleCounterAdd(m *wire.CounterAdd) {
	cs.serveKeyed(m, auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID, func(c *core.Cache) (wire.Message, *wire.Error) {
		return counterAddIn(c, m)
	})
}

func (cs *controlStream) handleCounterGet(m *wire.CounterGet) {
	cs.serveKeyed(m, auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID, func(c *core.Cache) (wire.Message, *wire.Error) {
		return counterGetIn(c, m)
	})
}

// counterAddIn and counterGetIn run one counter operation on a cache this
// broker serves, for its own clients and for forwarded ones; the caller
// answers after core.Cache.WaitStaged.
func counterAddIn(c *core.Cache, m *wire.CounterAdd) (wire.Message, *wire.Error) {
	sum, err := c.CounterAddStaged(m.Key, *m.Delta)
	if err != nil {
		return nil, asWireError(err)
	}
	return &wire.CounterValue{Key: m.Key, Value: &sum, RequestID: m.RequestID}, nil
}

func counterGetIn(c *core.Cache, m *wire.CounterGet) (wire.Message, *wire.Error) {
	sum, ok, err := c.CounterGetStaged(m.Key)
	if err != nil {
		return nil, asWireError(err)
	}
	v := &wire.CounterValue{Key: m.Key, RequestID: m.RequestID}
	if ok {
		v.Value = &sum
	}
	return v, nil
}

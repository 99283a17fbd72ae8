package core

import (
	"github.com/felixmq/felix/wire"

	flog "github.com/felixmq/felix/log"
)

// Groups returns the shard's consumer groups, opening their state file on
// first use. A shard that is not durable serves no groups: a group that
// forgot its position on a restart would redeliver everything.
func (sh *Shard) Groups() (*Groups, error) {
	if g := sh.groups.Load(); g != nil {
		return g, nil
	}
	if sh.unavailable != nil {
		return nil, sh.errUnavailable(sh.unavailable)
	}
	if sh.log == nil {
		return nil, wire.NewError(wire.CodeInvalidRequest, "stream %s is not durable: consumer groups need a durable stream, whose log keeps their position", sh.stream.key.Stream).
			WithDetail(wire.DetailReason, "not_durable")
	}
	sh.groupsMu.Lock()
	defer sh.groupsMu.Unlock()
	if g := sh.groups.Load(); g != nil {
		return g, nil
	}
	if sh.closed.Load() {
		return nil, sh.errClosed()
	}
	c := sh.stream.cfg.Storage
	g, err := openGroups(sh, ShardDir(c.Dir, sh.stream.key, sh.index), c.Fsync == flog.FsyncAlways)
	if err != nil {
		return nil, sh.errUnavailable(err)
	}
	sh.groups.Store(g)
	return g, nil
}

// closeGroups closes the group state file, if open.
func (sh *Shard) closeGroups() {
	sh.groupsMu.Lock()
	defer sh.groupsMu.Unlock()
	if g := sh.groups.Load(); g != nil {
		g.close()
	}
}

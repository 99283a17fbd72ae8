package broker

import "github.com/felixmq/felix/wire"

// applyView makes v the view the broker routes by and acts on the shards
// this broker gained and lost with it.
func (s *Server) applyView(v wire.ClusterView) {
	gained, lost := s.routes.Apply(v)
	s.ownershipChanged(gained, lost)
}

// ownershipChanged opens the shards this broker gained and closes the
// ones it lost. (Placeholder: the core does not open shards by
// ownership yet.)
func (s *Server) ownershipChanged(gained, lost []OwnedShard) {}

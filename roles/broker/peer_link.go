package broker

import (
	"context"
	"fmt"
	"net"

	"github.com/felixmq/felix/roles/broker/peer"
)

// joinCluster starts the peer listener (when configured), then makes
// the first registration, which names the listener's address. On an
// error nothing is left running.
func (s *Server) joinCluster(ctx context.Context, ln, tcpLn net.Addr) (*peer.Endpoint, *registration, bool, error) {
	var si storageIdentity
	if s.registry != nil || s.cfg.Peer.Addr != "" {
		var err error
		if si, err = openStorageIdentity(s.cfg.Durable.StorageDir, s.cfg.Durable.Fsync, readBootID); err != nil {
			return nil, nil, false, fmt.Errorf("broker: %w", err)
		}
		si.logCrashed(s.log)
		s.runMarker = si.marker
		if s.registry != nil {
			// Assignments name the identity the control plane knows this
			// broker by: the one it registers (routeTable.mine).
			s.routes.storageID = si.ID
		}
	}
	sid := si.ID
	pe, err := s.startPeer(s.nodeID(), sid)
	if err != nil {
		return nil, nil, false, err
	}
	var peerAddr net.Addr
	if pe != nil {
		peerAddr = pe.Addr()
	}
	reg, registered, err := s.registerAtStart(ctx, ln, tcpLn, peerAddr, si)
	if err != nil && pe != nil {
		pe.Close()
	}
	return pe, reg, registered, err
}

// startPeer starts the peer listener when one is configured (nil, nil
// otherwise). Its Close is run by a goroutine under bgWG once the
// background work stops, so Shutdown waits for it.
func (s *Server) startPeer(nodeID, storageID string) (*peer.Endpoint, error) {
	pc := s.cfg.Peer
	if pc.Addr == "" {
		return nil, nil
	}
	creds, err := pc.credentials(nodeID)
	if err != nil {
		return nil, fmt.Errorf("broker: peer listener: %w", err)
	}
	ep, err := peer.Listen(pc.Addr, peer.Config{
		NodeID: nodeID, StorageID: storageID, Creds: creds, Logger: s.log,
		KeepAlive: s.cfg.KeepAlive, MaxIdleTimeout: s.cfg.MaxIdleTimeout, Transport: pc.Transport,
		// Forwarded requests (forward.go): a client's largest frame and
		// room for the forward's header.
		Handle: s.handlePeerCall, MaxCallBytes: s.cfg.MaxFrameBytes + 64<<10,
	})
	if err != nil {
		return nil, fmt.Errorf("broker: --peer-addr %s: %w", pc.Addr, err)
	}
	s.log.Info("peer listener started", "addr", ep.Addr().String(), "node_id", nodeID, "alpn", peer.ALPN, "dials_over", ep.Transport())
	return ep, nil
}

// stopPeerAtShutdown closes ep when the background work stops.
func (s *Server) stopPeerAtShutdown(ep *peer.Endpoint) {
	if ep == nil {
		return
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		<-s.bgCtx.Done()
		ep.Close()
	}()
}

// Peer is the broker's peer endpoint (nil before Start or without a
// peer listener): part 2's replication dials other brokers through it.
func (s *Server) Peer() *peer.Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peer
}

// PeerAddr is the peer listener's address (nil without one).
func (s *Server) PeerAddr() net.Addr {
	if ep := s.Peer(); ep != nil {
		return ep.Addr()
	}
	return nil
}

// nodeID is this broker's node id, defaulted.
func (s *Server) nodeID() string {
	if s.cfg.Node.ID == "" {
		return DefaultNodeID
	}
	return s.cfg.Node.ID
}

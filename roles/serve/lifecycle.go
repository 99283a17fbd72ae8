package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// stopFunc stops one thing a node started; ctx bounds how long it may take.
type stopFunc func(ctx context.Context) error

// startedSet is what a node has started so far, in start order. Each part
// of a start pushes how to stop what it started as soon as that is
// running, so a later failure can stop everything before it.
type startedSet struct {
	names []string
	stops []stopFunc
}

// push records that name is running and how to stop it.
func (s *startedSet) push(name string, stop stopFunc) {
	s.names = append(s.names, name)
	s.stops = append(s.stops, stop)
}

// stopAll stops everything started, newest first, each under ctx, and
// empties the set. Errors are logged and returned joined; a failed stop
// does not keep the older ones from running.
func (s *startedSet) stopAll(ctx context.Context, log *slog.Logger) error {
	var errs []error
	for i := len(s.stops) - 1; i >= 0; i-- {
		if err := s.stops[i](ctx); err != nil {
			log.Error("stop failed", "part", s.names[i], "err", err)
			errs = append(errs, fmt.Errorf("stop %s: %w", s.names[i], err))
		}
	}
	s.names, s.stops = nil, nil
	return errors.Join(errs...)
}

// len returns how many parts are running.
func (s *startedSet) len() int { return len(s.stops) }

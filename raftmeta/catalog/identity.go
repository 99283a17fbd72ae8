package catalog

import (
	"fmt"
	"strconv"

	"github.com/felixmq/felix/wire"
)

// stampIncarnation gives a stream or cache written under key its
// incarnation: the one it already has when it exists (an update never
// changes it, whatever the command carries), else a new one. A new one
// is the sequence number the write takes in its kind's change log, which
// no earlier resource of the kind had and no later one will: the
// sequence only grows, and snapshots carry it. It is derived here, in
// the state machine, so every replica assigns the same. An import keeps
// the incarnations it carries, so a catalog moved or restored keeps its
// resources' identities.
func (w *writer) stampIncarnation(kind wire.CatalogKind, key string, has bool, item *wire.CatalogItem) error {
	var inc *string
	switch {
	case kind == wire.KindStreams && item.Stream != nil:
		s := *item.Stream
		item.Stream, inc = &s, &s.Incarnation
	case kind == wire.KindCaches && item.Cache != nil:
		c := *item.Cache
		item.Cache, inc = &c, &c.Incarnation
	default:
		return nil
	}
	if has {
		old, err := decodeItem(w.tx.Bucket(liveBucket(kind)).Get([]byte(key)))
		if err != nil {
			return fmt.Errorf("%s %q: %w", kind, key, err)
		}
		*inc = incarnationOf(old)
		return nil
	}
	if w.importing && *inc != "" {
		return nil
	}
	*inc = strconv.FormatUint(w.tx.Bucket(logBucket(kind)).Sequence()+1, 10)
	return nil
}

func incarnationOf(it wire.CatalogItem) string {
	switch {
	case it.Stream != nil:
		return it.Stream.Incarnation
	case it.Cache != nil:
		return it.Cache.Incarnation
	}
	return ""
}

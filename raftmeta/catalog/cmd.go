package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/felixmq/felix/wire"
)

// catalogCmdVersion is the version of the command envelope. A member that
// meets a newer version refuses the command deterministically rather than
// guessing at it.
const catalogCmdVersion = 1

// Catalog command operations.
const (
	opWrite          = "write"
	opDelete         = "delete"
	opPutMeta        = "put_meta"
	opPutMetaAbsent  = "put_meta_if_absent"
	opDeleteMeta     = "delete_meta"
	opBootstrap      = "bootstrap"
	opBatch          = "batch"
	opPutRecord      = "put_record"
	opDeleteRecord   = "delete_record"
	opImport         = "import"
	resultTrue       = "1"
	resultFalse      = "0"
	resultReplayed   = "replayed"
	batchMaxItems    = 10000
	maxIdempotencyLn = 256
	maxRequestIDLen  = 64
)

// WriteMode says how a catalog write treats an existing resource.
type WriteMode string

// Write modes.
const (
	ModeCreate WriteMode = "create" // refuse when it exists
	ModePut    WriteMode = "put"    // create or replace
	ModeUpdate WriteMode = "update" // refuse when it does not exist
)

// Record buckets: small keyed records beside the catalog (RBAC data),
// replicated but not published on a feed. Keys start with the tenant id
// and a '/', so a tenant delete removes them.
const (
	RecordPolicies    = "policies"
	RecordAssignments = "assignments"
)

// Batch creates a namespace's streams and caches all together or not at
// all. With an IdempotencyKey, a retry of the same batch after it was
// applied succeeds without doing anything; the same key with a different
// batch is a conflict.
type Batch struct {
	Tenant         string            `json:"tenant"`
	Namespace      string            `json:"namespace"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Streams        []wire.StreamSpec `json:"streams,omitempty"`
	Caches         []wire.CacheSpec  `json:"caches,omitempty"`
}

// Import is a whole catalog loaded at once (the one-time move of a
// single-node catalog into the Raft store). It applies only to an empty
// catalog.
type Import struct {
	Tenants    []wire.Tenant     `json:"tenants,omitempty"`
	Namespaces []wire.Namespace  `json:"namespaces,omitempty"`
	Streams    []wire.StreamSpec `json:"streams,omitempty"`
	Caches     []wire.CacheSpec  `json:"caches,omitempty"`
	Meta       map[string][]byte `json:"meta,omitempty"`
}

// catalogCmd is the envelope of every catalog command, encoded as JSON.
type catalogCmd struct {
	V         int               `json:"v"`
	Op        string            `json:"op"`
	Kind      wire.CatalogKind  `json:"kind,omitempty"`
	Mode      WriteMode         `json:"mode,omitempty"`
	Item      *wire.CatalogItem `json:"item,omitempty"`
	Key       string            `json:"key,omitempty"`
	Value     []byte            `json:"value"` // an empty value stays empty, not absent
	Recursive bool              `json:"recursive,omitempty"`
	Bucket    string            `json:"bucket,omitempty"`
	Tenant    *wire.Tenant      `json:"tenant,omitempty"`
	Namespace *wire.Namespace   `json:"namespace,omitempty"`
	Batch     *Batch            `json:"batch,omitempty"`
	Import    *Import           `json:"import,omitempty"`
	Broker    *brokerCmd        `json:"broker,omitempty"`    // the broker registry's commands (brokers.go)
	Placement *PlacementChange  `json:"placement,omitempty"` // a placement pass (placement.go)
	// Request, when set, makes the command exactly-once: a second entry
	// with the same request id is not applied again and answers with the
	// first one's outcome, so a proposer may re-propose a command whose
	// outcome it does not know.
	Request string `json:"req,omitempty"`
}

func encodeCmd(c catalogCmd) []byte {
	c.V = catalogCmdVersion
	b, _ := json.Marshal(c) // plain structs of strings, numbers and slices always marshal
	return b
}

// CmdWrite encodes a write of one resource of kind (tenants, namespaces,
// streams, caches or revocations); item carries the resource.
func CmdWrite(kind wire.CatalogKind, mode WriteMode, item wire.CatalogItem) []byte {
	return encodeCmd(catalogCmd{Op: opWrite, Kind: kind, Mode: mode, Item: &item})
}

// CmdDelete encodes the removal of the resource of kind at key (see
// CatalogKey); recursive also removes what a tenant or namespace holds.
func CmdDelete(kind wire.CatalogKind, key string, recursive bool) []byte {
	return encodeCmd(catalogCmd{Op: opDelete, Kind: kind, Key: key, Recursive: recursive})
}

// CmdPutMeta encodes setting a meta value.
func CmdPutMeta(key string, value []byte) []byte {
	return encodeCmd(catalogCmd{Op: opPutMeta, Key: key, Value: value})
}

// CmdPutMetaIfAbsent encodes setting a meta value unless the key is set;
// the result is the value the key holds afterwards.
func CmdPutMetaIfAbsent(key string, value []byte) []byte {
	return encodeCmd(catalogCmd{Op: opPutMetaAbsent, Key: key, Value: value})
}

// CmdDeleteMeta encodes removing a meta key (absent is not an error).
func CmdDeleteMeta(key string) []byte {
	return encodeCmd(catalogCmd{Op: opDeleteMeta, Key: key})
}

// CmdBootstrap encodes: unless meta flag is set, create t and ns (each only
// if missing) and set flag to stamp. The result is "1" when it did so.
func CmdBootstrap(flag string, stamp []byte, t wire.Tenant, ns wire.Namespace) []byte {
	return encodeCmd(catalogCmd{Op: opBootstrap, Key: flag, Value: stamp, Tenant: &t, Namespace: &ns})
}

// CmdBatch encodes an all-or-nothing batch create. The result is
// "replayed" when an earlier batch with the same idempotency key already
// did the work.
func CmdBatch(b Batch) []byte { return encodeCmd(catalogCmd{Op: opBatch, Batch: &b}) }

// CmdPutRecord encodes storing value under key in a record bucket
// (RecordPolicies, RecordAssignments). The key's tenant must exist.
func CmdPutRecord(bucket, key string, value []byte) []byte {
	return encodeCmd(catalogCmd{Op: opPutRecord, Bucket: bucket, Key: key, Value: value})
}

// CmdDeleteRecord encodes removing key from a record bucket.
func CmdDeleteRecord(bucket, key string) []byte {
	return encodeCmd(catalogCmd{Op: opDeleteRecord, Bucket: bucket, Key: key})
}

// CmdImport encodes loading a whole catalog into an empty one. The result
// is "1" when it was loaded, "0" when the catalog already held data.
func CmdImport(imp Import) []byte { return encodeCmd(catalogCmd{Op: opImport, Import: &imp}) }

// WithRequestID returns cmd marked with a request id (1 to 64 bytes, random
// per logical call): the catalog applies the first committed copy and
// answers later copies with its recorded outcome.
func WithRequestID(cmd []byte, id string) ([]byte, error) {
	if id == "" || len(id) > maxRequestIDLen {
		return nil, fmt.Errorf("raftmeta: request id must be 1 to %d bytes", maxRequestIDLen)
	}
	// Only the envelope's version and operation are decoded, to check that
	// cmd is a command; the id is then appended as the object's last
	// member (the last of duplicate members wins when it is decoded).
	var head struct {
		V  int    `json:"v"`
		Op string `json:"op"`
	}
	if err := json.Unmarshal(cmd, &head); err != nil {
		return nil, fmt.Errorf("raftmeta: not a catalog command: %w", err)
	}
	if head.Op == "" {
		return nil, errors.New("raftmeta: not a catalog command: no operation")
	}
	body := bytes.TrimRight(cmd, " \t\r\n")
	body = body[:len(body)-1]     // the object's closing brace
	quoted, _ := json.Marshal(id) // a string always marshals
	out := make([]byte, 0, len(body)+len(quoted)+8)
	out = append(out, body...)
	out = append(out, `,"req":`...)
	out = append(out, quoted...)
	return append(out, '}'), nil
}

// CatalogKey is the key a resource is filed under: "tenant", "tenant/ns",
// "tenant/ns/name"; a revocation is "tenant/subject". Names never hold '/',
// so a key prefix selects exactly one parent's children.
func CatalogKey(parts ...string) string { return strings.Join(parts, "/") }

// itemKey derives the key and parent of item for kind, or reports that
// item does not carry a resource of that kind.
func itemKey(kind wire.CatalogKind, it *wire.CatalogItem) (key string, parent parentRef, ok bool) {
	switch {
	case kind == wire.KindTenants && it.Tenant != nil && it.Tenant.TenantID != "":
		return it.Tenant.TenantID, parentRef{}, true
	case kind == wire.KindNamespaces && it.Namespace != nil && it.Namespace.Namespace != "":
		n := it.Namespace
		return CatalogKey(n.TenantID, n.Namespace), tenantParent(n.TenantID), true
	case kind == wire.KindStreams && it.Stream != nil && it.Stream.Stream != "":
		s := it.Stream
		return CatalogKey(s.TenantID, s.Namespace, s.Stream), namespaceParent(s.TenantID, s.Namespace), true
	case kind == wire.KindCaches && it.Cache != nil && it.Cache.Cache != "":
		c := it.Cache
		return CatalogKey(c.TenantID, c.Namespace, c.Cache), namespaceParent(c.TenantID, c.Namespace), true
	case kind == wire.KindRevocations && it.Revocation != nil && it.Revocation.Subject != "":
		r := it.Revocation
		return CatalogKey(r.TenantID, r.Subject), tenantParent(r.TenantID), true
	}
	return "", parentRef{}, false
}

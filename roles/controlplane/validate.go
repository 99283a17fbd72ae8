package controlplane

import (
	"fmt"
	"strings"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Input limits of the REST API.
const (
	maxNameLen        = 128
	maxShards         = 1024
	maxReplication    = 7
	maxDisplayNameLen = 256
	maxSubjectLen     = 256
	maxPerms          = 256
	maxTokenTTL       = 10 * 365 * 24 * 3600 // seconds
	defaultTokenTTL   = 3600                 // seconds, when ttl_seconds is absent
)

// problems collects every invalid field of one request so the caller
// learns about all of them at once.
type problems []string

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

// err is nil when nothing was wrong, else an invalid_request error.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &wire.Error{Code: wire.CodeInvalidRequest, Retry: wire.RetryFatal, Message: strings.Join(p, "; ")}
}

// name checks a resource name: 1-128 characters of [A-Za-z0-9._-].
func (p *problems) name(field, v string) {
	if v == "" {
		p.add(field, "required")
		return
	}
	if len(v) > maxNameLen {
		p.add(field, "%d characters is too long (at most %d)", len(v), maxNameLen)
		return
	}
	for i := 0; i < len(v); i++ {
		if !nameByte(v[i]) {
			p.add(field, "%q holds %q; use only letters, digits, '.', '_' and '-'", v, v[i])
			return
		}
	}
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func validateTenant(t wire.Tenant) error {
	var p problems
	p.name("tenant_id", t.TenantID)
	if len(t.DisplayName) > maxDisplayNameLen {
		p.add("display_name", "at most %d characters", maxDisplayNameLen)
	}
	return p.err()
}

// applyStreamDefaults fills what a create request may leave out; rf is
// the replication factor of a stream that gives none
// (FELIX_DEFAULT_REPLICATION_FACTOR; 0 counts as 1).
func applyStreamDefaults(s *wire.StreamSpec, rf uint32) {
	if s.Shards == 0 {
		s.Shards = 1
	}
	if s.Consistency == "" {
		s.Consistency = "leader"
	}
	if s.ReplicationFactor == 0 {
		s.ReplicationFactor = max(rf, 1)
	}
}

// streamCreate is the body of a stream create: the spec, with shards
// read apart so that an explicit 0 is refused instead of becoming the
// default.
type streamCreate struct {
	wire.StreamSpec
	Shards *uint32 `json:"shards,omitempty"` // nil: absent, the default 1
}

// newStream is the spec a create request asks for, before defaults,
// with the problem of an explicit 0 shards when there is one.
func (c streamCreate) newStream() (wire.StreamSpec, problems) {
	sp := c.StreamSpec
	var p problems
	if c.Shards != nil {
		if *c.Shards == 0 {
			p.add("shards", "0 is out of range 1..%d (omit it for 1)", maxShards)
		}
		sp.Shards = *c.Shards
	}
	return sp, p
}

// validateNewStream checks the spec of a stream to create (after
// defaults). A replication factor above 1 and quorum consistency are
// accepted: durable streams get followers (docs/placement.md, "Replica
// sets"); in-memory streams keep one copy whatever the factor.
func validateNewStream(s wire.StreamSpec) error {
	return streamProblems(s).err()
}

// validateStream checks a complete stream spec (after defaults).
func validateStream(s wire.StreamSpec) error {
	return streamProblems(s).err()
}

func streamProblems(s wire.StreamSpec) problems {
	var p problems
	p.name("stream", s.Stream)
	if s.Shards < 1 || s.Shards > maxShards {
		p.add("shards", "%d is out of range 1..%d", s.Shards, maxShards)
	}
	if s.Consistency != "leader" && s.Consistency != "quorum" {
		p.add("consistency", "%q is not one of \"leader\", \"quorum\"", s.Consistency)
	}
	if s.ReplicationFactor < 1 || s.ReplicationFactor > maxReplication {
		p.add("replication_factor", "%d is out of range 1..%d", s.ReplicationFactor, maxReplication)
	}
	p.queuePolicy(s.SubQueuePolicy)
	p.retention(s.Retention)
	return p
}

func (p *problems) queuePolicy(v string) {
	switch v {
	case "", "drop_new", "block", "drop_old":
	default:
		p.add("sub_queue_policy", "%q is not one of \"drop_new\", \"block\", \"drop_old\" (or empty for the broker default)", v)
	}
}

func (p *problems) retention(r wire.Retention) {
	if r.MaxSizeBytes != nil && *r.MaxSizeBytes == 0 {
		p.add("retention.max_size_bytes", "must be at least 1 when set (omit it for no bound)")
	}
	if r.MaxAgeSeconds != nil && *r.MaxAgeSeconds == 0 {
		p.add("retention.max_age_seconds", "must be at least 1 when set (omit it for no bound)")
	}
}

func validateCache(c wire.CacheSpec) error {
	var p problems
	p.name("cache", c.Cache)
	if c.Shards > maxShards {
		p.add("shards", "%d is out of range 1..%d (or 0 for the broker default)", c.Shards, maxShards)
	}
	return p.err()
}

// tokenRequest is the body of POST /v1/tenants/{tenant}/tokens.
type tokenRequest struct {
	Subject    string   `json:"sub"`
	Perms      []string `json:"perms"`
	TTLSeconds *int64   `json:"ttl_seconds,omitempty"`
}

// validateTokenRequest checks the request and returns its compiled perms.
func validateTokenRequest(r tokenRequest) (*auth.Matcher, error) {
	var p problems
	if r.Subject == "" {
		p.add("sub", "required")
	} else if len(r.Subject) > maxSubjectLen {
		p.add("sub", "at most %d characters", maxSubjectLen)
	}
	if r.TTLSeconds != nil && (*r.TTLSeconds < 1 || *r.TTLSeconds > maxTokenTTL) {
		p.add("ttl_seconds", "%d is out of range 1..%d (ten years)", *r.TTLSeconds, maxTokenTTL)
	}
	var m *auth.Matcher
	switch {
	case len(r.Perms) == 0:
		p.add("perms", "at least one permission is required")
	case len(r.Perms) > maxPerms:
		p.add("perms", "%d entries is too many (at most %d)", len(r.Perms), maxPerms)
	default:
		var err error
		if m, err = auth.CompilePerms(r.Perms); err != nil {
			p.add("perms", "%v", err)
		} else if err := auth.CheckActions(r.Perms); err != nil {
			p.add("perms", "%v", err)
		}
	}
	return m, p.err()
}

package controlplane

import (
	"encoding/json"
	"regexp"
	"strings"
)

// obj is a JSON object in the OpenAPI document.
type obj = map[string]any

var pathParamRE = regexp.MustCompile(`\{([a-z]+)\}`)

// buildOpenAPI renders the OpenAPI 3.0 document for routes.
func buildOpenAPI(routes []route) ([]byte, error) {
	paths := obj{}
	for _, rt := range routes {
		item, _ := paths[rt.path].(obj)
		if item == nil {
			item = obj{}
			paths[rt.path] = item
		}
		item[strings.ToLower(rt.method)] = operation(rt)
	}
	doc := obj{
		"openapi": "3.0.3",
		"info": obj{
			"title":       "Felix control plane",
			"version":     "1",
			"description": "Catalog of tenants, namespaces, streams and caches; token minting; signing keys; catalog feeds for brokers.",
		},
		"paths": paths,
		"components": obj{
			"schemas": withClusterSchemas(schemas()),
			"securitySchemes": obj{
				"felixToken": obj{"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
			},
		},
	}
	return json.Marshal(doc)
}

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func operation(rt route) obj {
	op := obj{"summary": rt.summary, "operationId": operationID(rt)}
	var params []obj
	for _, m := range pathParamRE.FindAllStringSubmatch(rt.path, -1) {
		params = append(params, obj{"name": m[1], "in": "path", "required": true, "schema": obj{"type": "string"}})
	}
	for _, q := range rt.query {
		params = append(params, obj{"name": q.name, "in": "query", "required": false, "description": q.doc, "schema": obj{"type": q.typ}})
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if rt.request != "" {
		op["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": ref(rt.request)}}}
	}
	ok := obj{"description": "success"}
	if rt.response != "" {
		ok["content"] = obj{"application/json": obj{"schema": ref(rt.response)}}
	}
	responses := obj{itoa(rt.status): ok, "default": obj{
		"description": "error",
		"content":     obj{"application/json": obj{"schema": ref("Error")}},
	}}
	if rt.notModified {
		responses["304"] = obj{"description": "not modified: the tag sent as known is current"}
	}
	op["responses"] = responses
	if rt.scope != scopeNone {
		op["security"] = []obj{{"felixToken": []string{}}}
		op["description"] = scopeDoc[rt.scope]
	} else {
		op["security"] = []obj{}
	}
	return op
}

var scopeDoc = map[scope]string{
	scopeCluster: "Needs a token holding cluster.manage on \"cluster\".",
	scopeTenant:  "Needs a token of the path's tenant holding tenant.manage on tenant:{tenant}, or a cluster.manage token.",
	scopeRead:    "Needs a token of the path's tenant holding tenant.manage on tenant:{tenant}, stream.subscribe on the stream or cache.read on the whole cache, or a cluster.manage token.",
	scopeToken:   "Needs a token of the path's tenant holding token.create on tenant:{tenant}, or a cluster.manage token. The minted permissions must each be held by the calling token.",
}

func operationID(rt route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(rt.method))
	for _, seg := range strings.Split(rt.path, "/") {
		seg = strings.Trim(seg, "{}.")
		if seg == "" || seg == "v1" {
			continue
		}
		seg = strings.NewReplacer(".", "_", "-", "_").Replace(seg)
		b.WriteString(strings.ToUpper(seg[:1]) + seg[1:])
	}
	return b.String()
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func str(desc string) obj { return obj{"type": "string", "description": desc} }
func name(desc string) obj {
	return obj{"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$", "description": desc}
}
func integer(min, max int64, desc string) obj {
	o := obj{"type": "integer", "description": desc, "minimum": min}
	if max > 0 {
		o["maximum"] = max
	}
	return o
}
func object(required []string, props obj) obj {
	o := obj{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}
func list(item string) obj {
	return object([]string{"items"}, obj{"items": obj{"type": "array", "items": ref(item)}})
}

func schemas() obj {
	return obj{
		"Object": obj{"type": "object"},
		"Status": object([]string{"status"}, obj{"status": str("ok (/live), ready, or not_ready (503)"), "reason": str("why the member is not ready")}),
		"JWKS": obj{"type": "object", "required": []string{"keys"}, "properties": obj{
			"keys": obj{"type": "array", "items": obj{"type": "object", "description": "public ES256 JWK (kty EC, crv P-256, kid = RFC 7638 thumbprint)"}},
		}},
		"Error": object([]string{"error"}, obj{"error": object([]string{"code", "message", "retry"}, obj{
			"code":    obj{"type": "string", "description": "unauthorized, forbidden, not_found, invalid_request, conflict, internal, ..."},
			"message": str("what went wrong, naming the field or resource"),
			"retry":   obj{"type": "string", "enum": []string{"fatal", "retry", "retry_after", "redirect", "outcome_unknown"}},
			"detail":  obj{"type": "object"},
		})}),
		"Tenant": object([]string{"tenant_id"}, obj{
			"tenant_id":    name("tenant id"),
			"display_name": obj{"type": "string", "maxLength": maxDisplayNameLen},
		}),
		"TenantList": list("Tenant"),
		"Revocation": object([]string{"tenant_id", "subject", "revoked_before"}, obj{
			"tenant_id":      name("tenant id"),
			"subject":        obj{"type": "string", "minLength": 1, "maxLength": maxSubjectLen, "description": "the principal (token sub)"},
			"revoked_before": integer(0, 0, "Unix seconds: tokens of the principal issued before this are refused"),
			"reason":         obj{"type": "string", "maxLength": maxReasonLen},
		}),
		"RevocationList": list("Revocation"),
		"RevocationRequest": object([]string{"subject"}, obj{
			"subject": obj{"type": "string", "minLength": 1, "maxLength": maxSubjectLen},
			"reason":  obj{"type": "string", "maxLength": maxReasonLen},
		}),
		"BatchRequest": object(nil, obj{
			"idempotency_key": obj{"type": "string", "maxLength": maxIdemKeyLen, "description": "repeat the same batch with the same key to retry safely (or send the Idempotency-Key header)"},
			"streams":         obj{"type": "array", "items": ref("StreamSpec")},
			"caches":          obj{"type": "array", "items": ref("CacheSpec")},
		}),
		"BatchResponse": object([]string{"streams", "caches", "replayed"}, obj{
			"streams":  obj{"type": "array", "items": ref("StreamSpec")},
			"caches":   obj{"type": "array", "items": ref("CacheSpec")},
			"replayed": obj{"type": "boolean", "description": "an earlier request with the same idempotency key already created them"},
		}),
		"Members": object([]string{"id", "leader", "term", "commit", "applied", "role", "ready", "members"}, obj{
			"id":          integer(1, 0, "the answering member"),
			"leader":      integer(0, 0, "0 while no leader is known"),
			"term":        integer(0, 0, "Raft term"),
			"commit":      integer(0, 0, "commit index"),
			"applied":     integer(0, 0, "applied index of the answering member"),
			"role":        str("leader, follower, candidate or pre-candidate"),
			"ready":       obj{"type": "boolean", "description": "the answering member is part of a working quorum"},
			"catching_up": obj{"type": "boolean", "description": "rejoining after losing its data; not voting yet"},
			"members": obj{"type": "array", "items": object([]string{"id", "url", "voter", "leader"}, obj{
				"id": integer(1, 0, "member id"), "url": str("peer URL"),
				"voter": obj{"type": "boolean", "description": "false for a learner"}, "leader": obj{"type": "boolean"},
			})},
		}),
		"NamespaceRequest": object([]string{"namespace"}, obj{
			"tenant_id": name("optional; must equal the path's tenant"),
			"namespace": name("namespace name"),
		}),
		"Namespace": object([]string{"tenant_id", "namespace"}, obj{
			"tenant_id": name("tenant id"),
			"namespace": name("namespace name"),
		}),
		"NamespaceList": list("Namespace"),
		"Retention": object(nil, obj{
			"max_size_bytes":  integer(1, 0, "bound on a durable stream's log size; omitted = none"),
			"max_age_seconds": integer(1, 0, "bound on record age; omitted = none"),
		}),
		"StreamSpec": object([]string{"stream"}, obj{
			"tenant_id":          name("taken from the path; optional in requests"),
			"namespace":          name("taken from the path; optional in requests"),
			"stream":             name("stream name"),
			"shards":             integer(1, maxShards, "shard count; default 1; fixed after creation"),
			"durable":            obj{"type": "boolean", "description": "write to the segment log"},
			"retention":          ref("Retention"),
			"consistency":        obj{"type": "string", "enum": []string{"leader", "quorum"}, "description": "default leader: an ack after the leader's write; quorum: once a majority of the replica set holds it (brokers' side in progress)"},
			"replication_factor": integer(1, maxReplication, "copies of each shard, the leader's included; default FELIX_DEFAULT_REPLICATION_FACTOR (1); durable streams get factor - 1 followers"),
			"sub_queue_policy":   obj{"type": "string", "enum": []string{"", "drop_new", "block", "drop_old"}, "description": "empty = broker default"},
		}),
		"StreamList": list("StreamSpec"),
		"StreamPatch": object(nil, obj{
			"retention":        ref("Retention"),
			"sub_queue_policy": obj{"type": "string", "enum": []string{"", "drop_new", "block", "drop_old"}},
		}),
		"CacheSpec": object([]string{"cache"}, obj{
			"tenant_id":   name("taken from the path; optional in requests"),
			"namespace":   name("taken from the path; optional in requests"),
			"cache":       name("cache name"),
			"shards":      integer(0, maxShards, "0 = broker default"),
			"max_entries": integer(0, 0, "0 = broker default"),
			"max_bytes":   integer(0, 0, "0 = broker default"),
		}),
		"CacheList": list("CacheSpec"),
		"TokenRequest": object([]string{"sub", "perms"}, obj{
			"sub":         obj{"type": "string", "minLength": 1, "maxLength": maxSubjectLen},
			"perms":       obj{"type": "array", "minItems": 1, "maxItems": maxPerms, "items": obj{"type": "string", "description": "<action>:<resource-pattern>"}},
			"ttl_seconds": integer(1, maxTokenTTL, "default 3600"),
		}),
		"TokenResponse": object([]string{"token", "expires_at"}, obj{
			"token":      str("compact ES256 JWT"),
			"expires_at": obj{"type": "string", "format": "date-time"},
		}),
		"OIDCConfig": object([]string{"issuer", "audience"}, obj{
			"issuer":          str("the iss upstream tokens carry, compared exactly"),
			"audience":        str("a value the upstream tokens' aud must contain"),
			"jwks_url":        str("http(s) URL of the issuer's JWKS (exactly one of jwks_url and jwks_file)"),
			"jwks_file":       str("path of a JWKS file on the control plane's hosts"),
			"principal_claim": str("claim naming the principal (default sub)"),
		}),
		"ExchangeRequest": object(nil, obj{
			"oidc_token":  str("the upstream JWT (or send it as Authorization: Bearer)"),
			"actions":     obj{"type": "array", "maxItems": maxPerms, "items": obj{"type": "string"}, "description": "narrow to these actions (default: all granted)"},
			"resources":   obj{"type": "array", "maxItems": maxPerms, "items": obj{"type": "string"}, "description": "narrow to these resource patterns (default: all granted)"},
			"ttl_seconds": integer(1, maxExchangeTokenTTL, "access token life, default 3600"),
		}),
		"RefreshRequest": object([]string{"refresh_token"}, obj{"refresh_token": str("the newest refresh token of the chain")}),
		"ExchangeResponse": object([]string{"token", "expires_at", "refresh_token", "refresh_expires_at", "subject", "permissions"}, obj{
			"token":              str("compact ES256 JWT"),
			"expires_at":         obj{"type": "string", "format": "date-time"},
			"refresh_token":      str("opaque; each refresh returns the next one"),
			"refresh_expires_at": obj{"type": "string", "format": "date-time", "description": "end of the refresh chain"},
			"subject":            str("the principal"),
			"permissions":        obj{"type": "array", "items": obj{"type": "string"}},
		}),
		"PolicyRequest": object([]string{"permissions"}, obj{
			"permissions": obj{"type": "array", "minItems": 1, "maxItems": maxPerms, "items": obj{"type": "string", "description": "<action>:<resource-pattern>"}},
		}),
		"Policy": object([]string{"tenant", "role", "permissions"}, obj{
			"tenant":      name("tenant id"),
			"role":        name("role name"),
			"permissions": obj{"type": "array", "items": obj{"type": "string"}},
		}),
		"PolicyList": list("Policy"),
		"Assignment": object([]string{"tenant", "principal", "role"}, obj{
			"tenant":    name("tenant id"),
			"principal": str("the principal (token sub)"),
			"role":      name("role name"),
		}),
		"AssignmentList": list("Assignment"),
		"RotateResponse": object([]string{"kid", "kids"}, obj{
			"kid":  str("the new active key id"),
			"kids": obj{"type": "array", "items": obj{"type": "string"}, "description": "every key in the JWKS, active first"},
		}),
		"CatalogItem": object([]string{"seq", "op"}, obj{
			"seq":        integer(0, 0, "the change's sequence number within its kind"),
			"op":         obj{"type": "string", "enum": []string{"put", "delete"}},
			"tenant":     ref("Tenant"),
			"namespace":  ref("Namespace"),
			"stream":     ref("StreamSpec"),
			"cache":      ref("CacheSpec"),
			"revocation": ref("Revocation"),
		}),
		"CatalogPage": object([]string{"kind", "seq", "items"}, obj{
			"kind":  obj{"type": "string", "enum": []string{"tenants", "namespaces", "caches", "streams", "revocations"}},
			"seq":   integer(0, 0, "cursor to pass as since to the next changes call"),
			"reset": obj{"type": "boolean", "description": "the changes after since are gone; take a new snapshot"},
			"items": obj{"type": "array", "items": ref("CatalogItem")},
		}),
	}
}

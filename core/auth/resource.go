package auth

import (
	"fmt"
	"strings"
)

// Action names an operation a permission can grant.
type Action string

// The actions Felix checks.
const (
	ActionStreamPublish   Action = "stream.publish"
	ActionStreamSubscribe Action = "stream.subscribe"
	ActionCacheRead       Action = "cache.read"     // get, watch, counter reads
	ActionCacheWrite      Action = "cache.write"    // put, delete, counter adds
	ActionTenantManage    Action = "tenant.manage"  // namespaces, streams and caches of a tenant
	ActionClusterManage   Action = "cluster.manage" // tenants, catalog feeds, cluster-wide state
	ActionTokenCreate     Action = "token.create"   // minting tokens for a tenant
	ActionGroupConsume    Action = "group.consume"  // consumer group polls, acks, nacks, dead letters, describe (on the stream)
	ActionGroupManage     Action = "group.manage"   // consumer group seek and delete (on the stream)
)

// ClusterResource is the resource of cluster-wide operations.
const ClusterResource = "cluster"

// StreamResource names a stream: "stream:<tenant>/<ns>/<stream>".
func StreamResource(tenant, ns, stream string) string {
	return "stream:" + tenant + "/" + ns + "/" + stream
}

// CacheResource names one key of a cache: "cache:<tenant>/<ns>/<cache>/<key>".
// The key is used verbatim; a '/' inside it makes the part before it an
// ancestor for matching purposes.
func CacheResource(tenant, ns, cache, key string) string {
	return "cache:" + tenant + "/" + ns + "/" + cache + "/" + key
}

// TenantResource names a tenant: "tenant:<tenant>".
func TenantResource(tenant string) string {
	return "tenant:" + tenant
}

// Actions lists every action Felix checks.
var Actions = []Action{
	ActionStreamPublish, ActionStreamSubscribe, ActionCacheRead, ActionCacheWrite,
	ActionTenantManage, ActionClusterManage, ActionTokenCreate, ActionGroupConsume, ActionGroupManage,
}

// CheckActions refuses the first permission whose action grants nothing:
// a literal action that is not one of Actions, or a pattern with '*' that
// matches none of them. Verify does not apply it, so a broker still
// accepts tokens naming actions a later version adds; minting a token and
// storing a role do, so that a typo ("stream.pub") is refused rather than
// becoming a grant that silently allows nothing. perms must compile.
func CheckActions(perms []string) error {
	for i, p := range perms {
		action, _, _ := strings.Cut(p, ":")
		if !knownAction(action) {
			return fmt.Errorf("auth: permission %d %q: unknown action %q (actions: %s)", i, p, action, actionList())
		}
	}
	return nil
}

func knownAction(pattern string) bool {
	g := compileGlob(pattern)
	for _, a := range Actions {
		if g.match(string(a)) {
			return true
		}
	}
	return false
}

func actionList() string {
	names := make([]string, len(Actions))
	for i, a := range Actions {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

package auth

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

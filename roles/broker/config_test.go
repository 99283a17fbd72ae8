package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnvDefaults(t *testing.T) {
	c, err := ConfigFromEnv(envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if c.KeepAlive != 2*time.Second || c.MaxIdleTimeout != 6*time.Second || c.MaxFrameBytes != 16<<20 ||
		c.MaxConnectionsPerSource != 256 || c.MaxSubscriptionsPerConn != 4096 ||
		c.PublishConnInflightBytes != 64<<20 || c.PublishTotalInflightBytes != 512<<20 ||
		c.CatalogSyncInterval != 500*time.Millisecond || c.Core.SubQueueCapacity != 512 ||
		c.Core.DefaultPolicy != core.DropNew || c.Sched.QueueDepth != 512 || c.PubIngressWait || c.AckOnCommit {
		t.Fatalf("defaults: %+v", c)
	}
	if c.ListenAddr != d.ListenAddr {
		t.Fatalf("listen %q", c.ListenAddr)
	}
}

func TestConfigFromEnvValues(t *testing.T) {
	c, err := ConfigFromEnv(envMap(map[string]string{
		"FELIX_KEEPALIVE_MS":              "1500",
		"FELIX_MAX_IDLE_TIMEOUT_MS":       "9000",
		"FELIX_PUB_INGRESS_WAIT":          "true",
		"FELIX_ACK_ON_COMMIT":             "1",
		"FELIX_SUB_QUEUE_POLICY":          "block",
		"FELIX_SUBSCRIBER_QUEUE_CAPACITY": "8",
		"FELIX_PUB_QUEUE_DEPTH":           "16",
		"FELIX_PUB_WORKERS":               "3",
		"FELIX_CATALOG_SYNC_INTERVAL_MS":  "250",
		"FELIX_BROKER_ADDR":               "127.0.0.1:7000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.KeepAlive != 1500*time.Millisecond || c.MaxIdleTimeout != 9*time.Second || !c.PubIngressWait || !c.AckOnCommit ||
		c.Core.DefaultPolicy != core.Block || c.Core.SubQueueCapacity != 8 || c.Sched.QueueDepth != 16 ||
		c.Sched.Executors != 3 || c.CatalogSyncInterval != 250*time.Millisecond || c.ListenAddr != "127.0.0.1:7000" {
		t.Fatalf("got %+v", c)
	}
}

func TestConfigFromEnvReportsEveryBadValue(t *testing.T) {
	_, err := ConfigFromEnv(envMap(map[string]string{
		"FELIX_KEEPALIVE_MS":                     "soon",
		"FELIX_MAX_FRAME_BYTES":                  "-1",
		"FELIX_PUB_INGRESS_WAIT":                 "maybe",
		"FELIX_SUB_QUEUE_POLICY":                 "drop_everything",
		"FELIX_MAX_SUBSCRIPTIONS_PER_CONN_TOTAL": "0",
	}))
	if err == nil {
		t.Fatal("bad values accepted")
	}
	for _, name := range []string{"FELIX_KEEPALIVE_MS", "FELIX_MAX_FRAME_BYTES", "FELIX_PUB_INGRESS_WAIT",
		"FELIX_SUB_QUEUE_POLICY", "FELIX_MAX_SUBSCRIPTIONS_PER_CONN_TOTAL"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

// TestConfigFromEnvCacheLogSettings: the log-backed cache's index bound
// and compaction interval reach the core's storage configuration, with
// their defaults when unset.
func TestConfigFromEnvCacheLogSettings(t *testing.T) {
	c, err := ConfigFromEnv(envMap(map[string]string{"FELIX_DURABLE_STORAGE_DIR": "/data"}))
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Durable.storage(); st.CacheIndexBytes != core.DefaultCacheIndexBytes || st.CacheCompactInterval != core.DefaultCacheCompactInterval {
		t.Fatalf("defaults: %+v", st)
	}
	c, err = ConfigFromEnv(envMap(map[string]string{"FELIX_DURABLE_STORAGE_DIR": "/data",
		"FELIX_CACHE_INDEX_MAX_BYTES": "1048576", "FELIX_CACHE_COMPACT_INTERVAL_MS": "1500"}))
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Durable.storage(); st.CacheIndexBytes != 1<<20 || st.CacheCompactInterval != 1500*time.Millisecond {
		t.Fatalf("set: %+v", st)
	}
	if _, err := ConfigFromEnv(envMap(map[string]string{"FELIX_CACHE_INDEX_MAX_BYTES": "12"})); err == nil ||
		!strings.Contains(err.Error(), "FELIX_CACHE_INDEX_MAX_BYTES") {
		t.Fatalf("a bound below 1 KiB: %v", err)
	}
}

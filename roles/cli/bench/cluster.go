package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// How a publishing scenario reaches the brokers (--route).
const (
	routeOne    = ""       // one connection to the broker the settings name (the default)
	routeDirect = "direct" // a ClusterClient over every broker: each publish goes to its shard's owner
	routeEntry  = "entry"  // a plain client pinned to one broker, which forwards what it does not own
)

// routing is how pubsub, durable and latency spread their publishes: over
// how many shards, and through which brokers. The zero value is the
// scenarios' behaviour before clusters: one shard, one connection.
type routing struct {
	route  string
	via    string   // the entry broker with routeEntry; "" is the first broker
	shards int      // shards of the bench stream; above 1 every publish is keyed
	keys   [][]byte // one routing key per shard, keys[i] lands on shard i
	// metrics are the brokers' metrics listeners (host:port) whose
	// forwarding counters the scenario reads before and after its run.
	metrics []string
}

// keyed says whether publishes carry a key: a stream of several shards
// gets keyed publishes, one key per shard in turn, so every shard gets
// the same share.
func (r routing) keyed() bool { return r.shards > 1 }

// cluster says whether the scenario talks to a cluster's brokers.
func (r routing) cluster() bool { return r.route != routeOne }

// routingFlags are the flags of the scenarios that take routing.
func routingFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "route", Usage: "how to reach a cluster's brokers (a client.json with broker_addrs, as felix dev writes), `MODE`: " +
			"direct publishes through a ClusterClient straight to each shard's owner; entry pins a plain client to one broker (--via), " +
			"which forwards publishes for shards it does not own; the subscriber reads every shard from its owner either way. " +
			"Unset: one connection to one broker, as before"},
		&cli.StringFlag{Name: "via", Usage: "with --route entry, the broker `ADDR` to publish through (default: the first of the client.json's brokers)"},
		&cli.IntFlag{Name: "shards", Value: 1, Usage: "shards of the bench stream; with more than one, every publish is keyed " +
			"(one payload per publish, --batch is ignored) and the keys take the shards in turn"},
		&cli.StringSliceFlag{Name: "metrics", Usage: "brokers' metrics listeners `HOST:PORT` (repeat or comma-separate; felix dev's dev.json " +
			"names them): report the forwarded publishes the run caused"},
	}
}

// maxBenchShards bounds --shards.
const maxBenchShards = 256

// parseRouting checks the routing flags of c.
func parseRouting(c *cli.Context) (routing, error) {
	return newRouting(c.String("route"), c.String("via"), c.Int("shards"), c.StringSlice("metrics"))
}

func newRouting(route, via string, shards int, metrics []string) (routing, error) {
	r := routing{route: route, via: via, shards: shards}
	switch route {
	case routeOne, routeDirect, routeEntry:
	default:
		return routing{}, fmt.Errorf("--route %q: want direct or entry", route)
	}
	if via != "" && route != routeEntry {
		return routing{}, errors.New("--via names the entry broker: use it with --route entry")
	}
	if shards < 1 || shards > maxBenchShards {
		return routing{}, fmt.Errorf("--shards %d: want 1..%d", shards, maxBenchShards)
	}
	for _, m := range metrics {
		for _, a := range strings.Split(m, ",") {
			if a = strings.TrimSpace(a); a != "" {
				r.metrics = append(r.metrics, a)
			}
		}
	}
	if r.keyed() {
		r.keys = keysForShards(uint32(shards))
	}
	return r, nil
}

// keysForShards returns one routing key per shard: keys[i] lands on
// shard i of a stream of n shards (wire.ShardForKey, the broker's and the
// SDK's routing).
func keysForShards(n uint32) [][]byte {
	keys := make([][]byte, n)
	left := n
	for i := 0; left > 0; i++ {
		k := []byte("bench-key-" + strconv.Itoa(i))
		if s := wire.ShardForKey(k, n); keys[s] == nil {
			keys[s] = k
			left--
		}
	}
	return keys
}

// addParams records the routing in a result's parameters; nothing when
// the routing is the default, so the output stays as it was.
func (r routing) addParams(params map[string]any) {
	if r.cluster() {
		params["route"] = r.route
	}
	if r.via != "" {
		params["via"] = r.via
	}
	if r.shards > 1 {
		params["shards"] = r.shards
	}
}

// pubClient is what a scenario publishes through: *felix.Client (one
// broker) or *felix.ClusterClient (every broker, owner routing).
type pubClient interface {
	Publish(ctx context.Context, namespace, stream string, payload []byte, ack felix.AckMode) error
	PublishBatch(ctx context.Context, namespace, stream string, payloads [][]byte, ack felix.AckMode) error
	PublishKeyed(ctx context.Context, namespace, stream string, key, payload []byte, ack felix.AckMode) error
	Finish(ctx context.Context) error
	Close() error
}

var (
	_ pubClient = (*felix.Client)(nil)
	_ pubClient = (*felix.ClusterClient)(nil)
)

// entryAddr is the broker an entry-routed publisher is pinned to.
func (t *target) entryAddr() string {
	if t.routing.via != "" {
		return t.routing.via
	}
	return t.cfg.Addr
}

// connectPublisher connects what the routing publishes through.
func (t *target) connectPublisher(ctx context.Context) (pubClient, error) {
	switch t.routing.route {
	case routeDirect:
		return t.connectCluster(ctx)
	case routeEntry:
		cfg := t.cfg
		cfg.Addr = t.entryAddr()
		return felix.Connect(ctx, cfg)
	}
	return t.connect(ctx)
}

// connectCluster connects a ClusterClient seeded with every broker.
func (t *target) connectCluster(ctx context.Context) (*felix.ClusterClient, error) {
	if len(t.brokers) == 0 {
		// A cluster of one (felix dev --nodes 1) is a cluster too.
		return nil, fmt.Errorf("--route %s needs a cluster: a client.json with broker_addrs (felix dev writes one)", t.routing.route)
	}
	return felix.ConnectCluster(ctx, t.brokers, t.cfg)
}

// eventSource is one subscription a scenario reads.
type eventSource interface {
	Next(ctx context.Context) (felix.Event, error)
	Close() error
}

// subscription is every shard of the bench stream, read through one or
// more sources, and the connection they use.
type subscription struct {
	sources []eventSource
	conn    interface{ Close() error }
}

func (s *subscription) Close() {
	for _, src := range s.sources {
		src.Close()
	}
	s.conn.Close()
}

// subscribeAll subscribes to every shard of stream from the latest event:
// shard 0 alone as before on one broker; each shard on its own with a
// keyed stream; on a cluster, through a ClusterClient's sharded
// subscription (each shard on its owner), whatever the publisher's route.
func (t *target) subscribeAll(ctx context.Context, stream string) (*subscription, error) {
	if t.routing.cluster() {
		cc, err := t.connectCluster(ctx)
		if err != nil {
			return nil, err
		}
		var ss *felix.ShardedSubscription
		err = whenReady(ctx, func() (err error) {
			ss, err = cc.SubscribeSharded(ctx, t.ns, stream, felix.ShardedOptions{Start: felix.Latest()})
			return err
		})
		if err != nil {
			cc.Close()
			return nil, err
		}
		if got := ss.Shards(); got != t.routing.shards {
			ss.Close()
			cc.Close()
			return nil, fmt.Errorf("subscribed to %d shards of %s, want %d", got, stream, t.routing.shards)
		}
		return &subscription{sources: []eventSource{noticesSkipped{ss}}, conn: cc}, nil
	}
	c, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	s := &subscription{conn: c}
	if !t.routing.keyed() {
		sub, err := subscribeWhenReady(ctx, c, t.ns, stream)
		if err != nil {
			c.Close()
			return nil, t.routeHint(err)
		}
		s.sources = append(s.sources, sub)
		return s, nil
	}
	for shard := range uint32(t.routing.shards) {
		var sub *felix.Subscription
		err := whenReady(ctx, func() (err error) {
			sub, err = c.SubscribeFrom(ctx, t.ns, stream, felix.SubscribeOptions{Start: felix.Latest(), Shard: shard})
			return err
		})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("subscribe shard %d: %w", shard, t.routeHint(err))
		}
		s.sources = append(s.sources, sub)
	}
	return s, nil
}

// routeHint adds to a refusal from a broker that does not own the shard,
// on a cluster without --route, how to reach the owners.
func (t *target) routeHint(err error) error {
	var nl *felix.NotLeaderError
	if !t.routing.cluster() && len(t.brokers) > 1 && errors.As(err, &nl) {
		return fmt.Errorf("%w (a cluster: pass --route direct or --route entry)", err)
	}
	return err
}

// noticesSkipped reads a sharded subscription past its shard notices (a
// shard that resumed carries on; the count of deliveries tells the rest).
type noticesSkipped struct{ *felix.ShardedSubscription }

func (n noticesSkipped) Next(ctx context.Context) (felix.Event, error) {
	for {
		ev, err := n.ShardedSubscription.Next(ctx)
		var notice *felix.ShardNotice
		if err != nil && errors.As(err, &notice) && !notice.Ended {
			continue
		}
		return ev, err
	}
}

// localShards reports which shards of stream the entry broker serves
// itself, so a latency run can tell forwarded publishes from the rest;
// nil when the route is not entry or the broker does not say.
func localShards(ctx context.Context, c pubClient, ns, stream string, addr string) map[uint32]bool {
	pc, ok := c.(*felix.Client)
	if !ok {
		return nil
	}
	owners, err := pc.ShardOwners(ctx, ns, stream, felix.KindStream)
	if err != nil {
		return nil
	}
	local := map[uint32]bool{}
	for _, o := range owners {
		if o.Addr == "" {
			return nil // a shard nobody serves now: no split
		}
		local[o.Shard] = o.Addr == addr
	}
	return local
}

// Forwarding counters read from the brokers' /metrics.
const (
	metricForwarded       = "felix_broker_forwarded_publishes_total"
	metricForwardFailures = "felix_broker_forward_failures_total"
)

var forwardMetrics = []string{metricForwarded, metricForwardFailures}

// forwardCounters sums each of forwardMetrics (every label set) over the
// brokers' metrics listeners; nil when none is given or one cannot be read.
func forwardCounters(ctx context.Context, addrs []string) map[string]float64 {
	if len(addrs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sum := map[string]float64{}
	for _, a := range addrs {
		if err := scrape(ctx, a, sum); err != nil {
			return nil
		}
	}
	return sum
}

func scrape(ctx context.Context, addr string, sum map[string]float64) error {
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if !strings.HasSuffix(url, "/metrics") {
		url = strings.TrimRight(url, "/") + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return addCounters(bufio.NewScanner(resp.Body), sum)
}

// addCounters adds the forwarding counters found in a Prometheus text
// exposition to sum.
func addCounters(sc *bufio.Scanner, sum map[string]float64) error {
	for sc.Scan() {
		line := sc.Text()
		for _, name := range forwardMetrics {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
			if len(fields) == 0 {
				continue
			}
			if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
				sum[name] += v
			}
		}
	}
	return sc.Err()
}

// addForwarded adds the counters' growth between before and after.
func addForwarded(r *result, before, after map[string]float64) {
	if before == nil || after == nil {
		return
	}
	r.add("forwarded_publishes", after[metricForwarded]-before[metricForwarded], "publishes")
	r.add("forward_failures", after[metricForwardFailures]-before[metricForwardFailures], "forwards")
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The durable-acked-r3 workload: durable-acked on three copies. Felix is a
// `felix dev --nodes 3` cluster with the bench stream created at
// replication factor 3 and quorum consistency, loaded by `felix bench
// durable --route direct` (each publish straight to the shard's leader);
// the peer is a JetStream stream with Replicas: 3 on a three-server NATS
// cluster, its publisher and subscriber connected to the stream's leader.

// r3Payload and r3Inflight are the load's shape, as durable-acked's.
const (
	r3Payload  = 4096
	r3Inflight = 256
)

const r3Note = "4 KiB, 256 in flight, three copies on both sides (three processes each, one machine). Felix: felix dev --nodes 3 " +
	"(each node GOMAXPROCS = cores / 3, felix dev's default), the bench stream at replication factor 3 with quorum consistency, " +
	"published through a ClusterClient to the shard's leader; periodic fsync every 250 ms. JetStream: three servers routed over " +
	"TLS, the stream with Replicas: 3, publisher and subscriber on the stream leader's server; default sync interval 2 min. " +
	"Both bounded to 1 GiB. Broker CPU per replicated MB: user + system CPU of the three servers together over the run, " +
	"divided by the MB acknowledged."

func durableAckedR3Workload() workload {
	return workload{name: "durable-acked-r3", peer: "JetStream R3, file storage, 3 servers (TLS)", note: r3Note,
		cases: func(o *options) []caseSpec {
			return []caseSpec{durableAckedR3(o, "always", "R3 quorum, fsync always / R3 sync_interval always", true),
				durableAckedR3(o, "periodic", "R3 quorum, fsync periodic / R3 default sync_interval", false)}
		}}
}

func durableAckedR3(o *options, fsync, name string, syncAlways bool) caseSpec {
	d := o.duration
	return caseSpec{
		name: name,
		metrics: []metric{{"acked", "MB/s", false, "published_mb_per_s", "acked_mb_per_s"},
			{"acked", "msgs/s", false, "published_msgs_per_s", "acked_msgs_per_s"}, cpuPerMBMetric},
		felix: func(ctx context.Context, e *env, tr string) (figures, error) {
			dev, err := e.felixDev(ctx, "r3-"+fsync, durableEnv(fsync)...)
			if err != nil {
				return nil, err
			}
			grown := watchStored(dev)
			f, err := withServersCPU(dev.pids(), "published", r3Payload, func() (figures, error) {
				return dev.bench(ctx, e.p, d+2*time.Minute, "durable", "--mode", "acked", "--inflight", strconv.Itoa(r3Inflight),
					"--payload", strconv.Itoa(r3Payload), "--policy", "block", "--duration", secs(d),
					"--route", "direct", "--replication-factor", "3", "--consistency", "quorum", "--transport", tr)
			})
			if err == nil {
				e.checkReplicated("durable-acked-r3", dev, grown())
			}
			return f, err
		},
		peer: func(ctx context.Context, e *env) (figures, error) {
			c, err := e.natsCluster(ctx, "r3-"+fsync, natsConfig{syncAlways: syncAlways})
			if err != nil {
				return nil, err
			}
			return withServersCPU(c.pids(), "acked", r3Payload, func() (figures, error) {
				return natsAckedR3(ctx, c, r3Payload, r3Inflight, d)
			})
		},
	}
}

// natsAckedR3 creates a JetStream stream with three replicas on the
// cluster, retrying while the cluster settles its meta leader and peers,
// and runs the acked load through the server that leads the stream.
func natsAckedR3(ctx context.Context, c *natsCluster, payload, inflight int, d time.Duration) (figures, error) {
	nc, err := c.members[0].connect("bench-js-admin")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("BENCHR3%d", time.Now().UnixNano())
	cfg := benchStreamConfig(name, jetstream.FileStorage, natsClusterSize)
	var info *jetstream.StreamInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		var s jetstream.Stream
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err = js.CreateOrUpdateStream(cctx, cfg)
		if err == nil {
			info, err = s.Info(cctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == natsClusterSize-1 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("jetstream: stream with %d replicas not led within 30s: %v", natsClusterSize, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer js.DeleteStream(context.Background(), name)
	leader := c.member(info.Cluster.Leader)
	if leader == nil {
		return nil, fmt.Errorf("jetstream: stream leader %q is not a member (%s)", info.Cluster.Leader, strings.Join(c.names, ", "))
	}
	return ackedLoad(ctx, leader, name, payload, inflight, d)
}

// watchStored samples the size of each node's durable logs every 200 ms
// until the returned function is called, which returns each node's
// largest growth over its size at the start. The bench deletes its stream
// when it ends and each node removes the files in its own time, so the
// sizes after a run say nothing; the growth during it does.
func watchStored(dev *felixDev) func() []int64 {
	base := dev.storedBytes()
	grown := make([]int64, len(base))
	sample := func() {
		for i, b := range dev.storedBytes() {
			grown[i] = max(grown[i], b-base[i])
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() []int64 {
		close(stop)
		<-done
		return grown
	}
}

// checkReplicated warns, in the workload's notes, when a node's durable
// logs did not grow during a run (grown, by node, from watchStored): the
// stream did not have three durable copies in that run.
func (e *env) checkReplicated(workload string, dev *felixDev, grown []int64) {
	var empty []string
	for i, b := range grown {
		if b <= 0 {
			empty = append(empty, dev.nodes[i].Name)
		}
	}
	if len(empty) > 0 {
		logf("%s: %s stored nothing during the run (growth by node: %v)", workload, strings.Join(empty, ", "), grown)
		e.warnings[workload] = "WARNING: in a run, " + strings.Join(empty, ", ") + " stored nothing, so the stream did not have three durable copies."
	}
}

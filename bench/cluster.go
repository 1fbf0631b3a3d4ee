package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// The cluster peer: clusterBrokers processes of the benchmarked ringlog
// binary on loopback, each a voter of the metadata quorum and a broker
// (`ringlog -node-id N -controller-voters ... -config server.properties`),
// with every port chosen free and every data directory under the run's
// work directory. Its topics have one replica on every broker.
const (
	clusterBrokers = 3
	clusterMinISR  = 2
	// The session timeout and heartbeat are those of ringlog's own
	// cluster tests, not Kafka's 9 s and 2 s: a failover is mostly the
	// wait for the controller to fence the dead broker (it has missed its
	// heartbeats for the session timeout), and the Replication section
	// measures three of them.
	clusterSessionTimeout = 2 * time.Second
	clusterHeartbeat      = 300 * time.Millisecond
	// clusterSlotsKey is the server.properties key of the follower fetch
	// streams' requests in flight (replication/fetcher Config.Slots).
	clusterSlotsKey = "ringlog.replica.fetch.slots"
)

// clusterTopicConfigs are the configs of every topic created on the
// cluster: min.insync.replicas only matters to acks=all produces.
func clusterTopicConfigs() map[string]*string {
	v := fmt.Sprint(clusterMinISR)
	return map[string]*string{"min.insync.replicas": &v}
}

// clusterProperties is the server.properties the cluster's brokers share.
func clusterProperties(slots int) string {
	s := fmt.Sprintf("broker.session.timeout.ms=%d\nbroker.heartbeat.interval.ms=%d\n",
		clusterSessionTimeout.Milliseconds(), clusterHeartbeat.Milliseconds())
	// No workload uses consumer groups: one partition of __consumer_offsets
	// instead of 50 spares each start 50 partitions to create and elect.
	s += "offsets.topic.num.partitions=1\n"
	if slots > 0 {
		s += fmt.Sprintf("%s=%d\n", clusterSlotsKey, slots)
	}
	return s
}

// clusterProcs is what it takes to (re)start a cluster's brokers.
type clusterProcs struct {
	broker string // the ringlog binary
	voters string // -controller-voters
	conf   string // the shared server.properties
	flush  string
	dirs   []string // data directories, by index
	addrs  []string // Kafka listeners, by index
	// started is broker 1's "ringlog started" log line.
	started string
}

// startCluster starts the cluster's brokers at once (none is ready before
// a majority of the quorum is up) and waits for all of them.
func (p *peer) startCluster(broker string) error {
	n := clusterBrokers
	cl := &clusterProcs{broker: broker, flush: map[bool]string{true: "always", false: "never"}[p.fsync],
		dirs: make([]string, n), addrs: make([]string, n), conf: filepath.Join(p.dataDir, "server.properties")}
	// A retried start (a port was taken meanwhile) starts from nothing: a
	// quorum's state names the voters' old addresses.
	for i := range n {
		cl.dirs[i] = filepath.Join(p.dataDir, fmt.Sprintf("broker-%d", i+1))
		if err := os.RemoveAll(cl.dirs[i]); err != nil {
			return err
		}
	}
	if err := os.WriteFile(cl.conf, []byte(clusterProperties(p.slots)), 0o644); err != nil {
		return err
	}
	var voters []string
	for i := range n {
		port, err := freePort()
		if err != nil {
			return err
		}
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, port))
	}
	cl.voters = strings.Join(voters, ",")
	p.cl = cl
	p.procs, p.admins = make([]*child, n), make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = p.startBroker(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range p.procs {
			if c != nil {
				c.stop()
			}
		}
		p.procs = nil
		return err
	}
	p.addr = strings.Join(cl.addrs, ",")
	p.settings = p.clusterSettings()
	return nil
}

// startBroker (re)starts broker i (node id i+1) with new Kafka and admin
// ports (the listener of a killed broker leaves its port in TIME_WAIT) and
// its quorum port, data directory and settings unchanged.
func (p *peer) startBroker(i int) error {
	cl := p.cl
	port, err := freePort()
	if err != nil {
		return err
	}
	adminPort, err := freePort()
	if err != nil {
		return err
	}
	addr, admin := fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", adminPort)
	args := []string{"-node-id", fmt.Sprint(i + 1), "-controller-voters", cl.voters, "-config", cl.conf,
		"-listen", addr, "-data-dir", cl.dirs[i], "-admin", admin, "-io", "auto", "-net", "gnet", "-flush", cl.flush}
	c, started, err := startRinglog(fmt.Sprintf("%s/broker-%d", p.id(), i+1), cl.broker, args)
	if err != nil {
		return err
	}
	p.procs[i], p.admins[i], cl.addrs[i] = c, admin, addr
	if i == 0 {
		cl.started = started
	}
	p.addr = strings.Join(cl.addrs, ",")
	return nil
}

// killBroker kills broker i with SIGKILL and waits until it is gone.
func (p *peer) killBroker(i int) {
	p.procs[i].kill()
}

// clusterSettings describes the cluster as the Peers table states it.
func (p *peer) clusterSettings() string {
	fields := map[string]string{}
	for _, m := range logField.FindAllStringSubmatch(p.cl.started, -1) {
		fields[m[1]] = strings.Trim(m[2], `"`)
	}
	io := "disk I/O as probed"
	if v, ok := fields["io"]; ok {
		io = fmt.Sprintf("disk I/O %s (%s), network %s", v, fields["io_reason"], fields["network"])
	}
	slots := clusterSlotsKey + " unset (the follower fetch stream's default: 4 requests in flight)"
	if p.slots > 0 {
		slots = fmt.Sprintf("%s=%d", clusterSlotsKey, p.slots)
	}
	return fmt.Sprintf("%d ringlog processes of the benchmarked binary on loopback (node ids 1-%d, each a voter of the "+
		"metadata quorum and a broker), each -io auto -flush %s (%s); every topic RF %d with min.insync.replicas=%d "+
		"(only acks=all consults it); broker.session.timeout.ms=%d, broker.heartbeat.interval.ms=%d, "+
		"replica.lag.time.max.ms 30000 (default), %s; offsets.topic.num.partitions=1 (no workload uses groups); "+
		"the %d brokers share this machine's %d cores with each other and the clients (each runs %d shards); "+
		"broker CPU and RSS are sums over the %d processes",
		clusterBrokers, clusterBrokers, p.cl.flush, io, clusterBrokers, clusterMinISR,
		clusterSessionTimeout.Milliseconds(), clusterHeartbeat.Milliseconds(), slots,
		clusterBrokers, runtime.NumCPU(), runtime.NumCPU(), clusterBrokers)
}

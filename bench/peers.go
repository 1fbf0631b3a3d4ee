package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/kafkaref"
)

// peerSpec is one system the suite measures.
type peerSpec struct {
	key  string // flag and file name: ringlog-uring
	name string // in tables: ringlog io_uring
	// nats is true for the one peer that does not speak Kafka: it is driven
	// by its own client (nats.go) with the same records, rates and bounds.
	nats bool
	// memory is true for kfake: nothing reaches a disk, so flush policies
	// and cache drops do not apply.
	memory bool
	// cluster is true for the peer made of clusterBrokers ringlog
	// processes (see cluster.go); its topics are replicated.
	cluster bool
	// kafkaNodes, when not 0, makes the peer Apache Kafka itself: that
	// many combined broker-and-controller JVMs started through
	// internal/kafkaref (see kafka.go). More than one replicates its
	// topics as the ringlog cluster does.
	kafkaNodes int
	// replicationOnly keeps the peer out of the matrix's tables: it runs
	// in the Replication section only.
	replicationOnly bool
	// saslSSL makes the peer ringlog with a SASL_SSL listener for its
	// clients beside its PLAINTEXT one (see saslssl.go); it runs the
	// workloads of its targets only.
	saslSSL bool
	// net, when set, is the ringlog broker's -net (its network path);
	// such a peer runs with -io uring and the workloads of issue 13's
	// targets only (see netpaths.go).
	net string
	// writes, when set, is the ringlog broker's -writes (buffered: appends
	// through the page cache); such a peer runs with -io uring and every
	// workload.
	writes string
	// acls, when not 0, makes the peer ringlog io_uring with its
	// authorizer on and that many bindings (see acls.go); it runs the
	// base produce workload only.
	acls int
	// absent, when set, is why the peer cannot run at all.
	absent string
	// optIn keeps the peer out of the default -peers: it runs when named.
	optIn bool
}

// peerSpecs lists the peers in report order. The first is the reference
// every ratio is taken against; Apache Kafka is the second reference,
// every table's ratios are taken against it too.
var peerSpecs = []peerSpec{
	{key: "ringlog-uring", name: "ringlog io_uring"},
	{key: "ringlog-portable", name: "ringlog portable"},
	{key: netUringPeer, name: "ringlog io_uring net", net: "uring"},
	{key: netLoopsPeer, name: "ringlog io_uring net on loops", net: "uring-loops", optIn: true},
	{key: bufferedPeer, name: "ringlog io_uring buffered writes", writes: "buffered", optIn: true},
	{key: saslSSLPeer, name: "ringlog SASL_SSL", saslSSL: true},
	{key: acl100Peer, name: "ringlog ACLs 100", acls: 100},
	{key: acl1000Peer, name: "ringlog ACLs 1,000", acls: 1000},
	{key: "kafka", name: "Apache Kafka", kafkaNodes: 1},
	{key: "kfake", name: "kfake (in memory)", memory: true},
	{key: "nats", name: "NATS JetStream (file)", nats: true},
	{key: clusterPeer, name: "ringlog 3-broker cluster", cluster: true},
	{key: kafkaClusterPeer, name: "Apache Kafka 3-node cluster", kafkaNodes: clusterBrokers, replicationOnly: true},
}

// The peers the report names: ratios are taken against the first two,
// the Replication section compares the clusters.
const (
	referencePeer    = "ringlog-uring"
	kafkaPeer        = "kafka"
	clusterPeer      = "ringlog-cluster"
	kafkaClusterPeer = "kafka-cluster"
	saslSSLPeer      = "ringlog-sasl-ssl"
	portablePeer     = "ringlog-portable"
	netUringPeer     = "ringlog-net-uring"
	// netLoopsPeer is -io uring -net uring-loops: connections on
	// io_uring loops of netpoll's own, -net uring's before it put them on
	// the shards' rings (ARCHITECTURE.md, "Connections on the shards'
	// rings").
	netLoopsPeer = "ringlog-net-loops"
	// bufferedPeer is -io uring -writes buffered: appends through the
	// page cache, as Kafka's, where the io_uring path's default writes
	// them with O_DIRECT (ARCHITECTURE.md, "Direct writes").
	bufferedPeer = "ringlog-buffered"
	acl100Peer   = "ringlog-acl100"
	acl1000Peer  = "ringlog-acl1000"
)

func peerKeys() []string {
	var ks []string
	for _, p := range peerSpecs {
		if !p.optIn {
			ks = append(ks, p.key)
		}
	}
	return ks
}

// allPeerKeys is every peer, the opt-in ones included.
func allPeerKeys() []string {
	var ks []string
	for _, p := range peerSpecs {
		ks = append(ks, p.key)
	}
	return ks
}

// matrixSpecs are the peers of the matrix's tables, in report order:
// every peer but those of the Replication section alone.
func matrixSpecs() []peerSpec {
	var ps []peerSpec
	for _, p := range peerSpecs {
		if !p.replicationOnly {
			ps = append(ps, p)
		}
	}
	return ps
}

// replicas is the replication factor of the peer's topics.
func (ps peerSpec) replicas() int {
	if ps.cluster || ps.kafkaNodes > 1 {
		return clusterBrokers
	}
	return 1
}

func peerSpecByKey(k string) (peerSpec, bool) {
	for _, p := range peerSpecs {
		if p.key == k {
			return p, true
		}
	}
	return peerSpec{}, false
}

// peer is a running instance of a peerSpec with one durability setting:
// the workloads with flush policy "always" get their own instances. A
// cluster may also run with one fetch slot per follower stream (the
// Replication section's comparison).
type peer struct {
	spec  peerSpec
	fsync bool
	slots int // cluster: ringlog.replica.fetch.slots; 0 is the broker's default
	// role, when set, makes this a second instance of the spec with a
	// part of its own: the Mirroring section's target (mirroring.go).
	role string

	started bool
	err     error // why it is unavailable
	// procs are the peer's processes: one, or a cluster's brokers in
	// node id order (node id i+1 is procs[i]).
	procs   []*child
	addr    string   // Kafka bootstrap address(es, comma-separated), or the NATS URL
	admins  []string // ringlog's admin HTTP addresses, by process
	dataDir string
	// settings says what the peer runs with, in the broker's own words
	// where it reports them (ringlog logs its I/O path and flush policy).
	settings string
	cl       *clusterProcs     // the cluster's ports and files; nil for the others
	kc       *kafkaref.Cluster // Apache Kafka's nodes; nil for the others
	sec      *saslSSL          // the SASL_SSL peer's certificates and user; nil for the others
	acl      *aclSetup         // an authorizer peer's files and administrator; nil for the others
}

// id is the peer's key qualified by its durability setting.
func (p *peer) id() string {
	id := p.spec.key
	if p.fsync {
		id += "+fsync"
	}
	if p.slots > 0 {
		id += fmt.Sprintf("+slots%d", p.slots)
	}
	if p.role != "" {
		id += "+" + strings.ReplaceAll(p.role, " ", "-")
	}
	return id
}

// seeds are the Kafka bootstrap addresses.
func (p *peer) seeds() []string { return strings.Split(p.addr, ",") }

// clientOpts are the kgo options every client of the peer needs besides
// its seeds: SASL_SSL's, or none.
func (p *peer) clientOpts() []kgo.Opt {
	if p.sec == nil {
		return nil
	}
	return p.sec.kgoOpts()
}

// kcatConn are kcat's arguments to reach the peer: its bootstrap
// address, and SASL_SSL's settings where it has them.
func (p *peer) kcatConn() []string {
	args := []string{"-b", p.addr}
	if p.sec != nil {
		args = append(args, p.sec.kcatArgs()...)
	}
	return args
}

// running is true once the peer's processes were started and are there.
func (p *peer) running() bool { return len(p.pids()) > 0 }

// pids are the peer's broker processes, in node id order.
func (p *peer) pids() []int {
	var ps []int
	for _, c := range p.procs {
		ps = append(ps, c.pid())
	}
	if p.kc != nil {
		for _, n := range p.kc.Nodes {
			ps = append(ps, n.Pid())
		}
	}
	return ps
}

// exited says which of the peer's processes exited, or "" when all run.
func (p *peer) exited() string {
	if p.kc != nil {
		return p.kafkaExited()
	}
	for _, c := range p.procs {
		if !c.alive() {
			return c.name + ": " + c.lastLine()
		}
	}
	return ""
}

// lastProblem is the last warning or error any of the peer's processes
// logged (for Kafka the last error: see kafkaProblem), or "".
func (p *peer) lastProblem() string {
	if p.kc != nil {
		return p.kafkaProblem()
	}
	var ls []string
	for _, c := range p.procs {
		if l := c.lastProblem(); l != "" {
			ls = append(ls, c.name+": "+l)
		}
	}
	return strings.Join(ls, "; ")
}

// durability is the peer's fsync setting as the tables show it.
func (p *peer) durability() string {
	switch {
	case p.spec.memory:
		return "in memory, no disk"
	case p.spec.nats && p.fsync:
		return "sync always"
	case p.spec.nats:
		return "sync_interval 2m (default)"
	case p.spec.kafkaNodes > 0:
		d := "flush never (Kafka's default)"
		if p.fsync {
			d = kafkaFlushAlways + "=1"
		}
		if p.spec.replicas() > 1 {
			d = fmt.Sprintf("RF %d (min ISR %d), %s", clusterBrokers, clusterMinISR, d)
		}
		return d
	case p.spec.cluster:
		d := fmt.Sprintf("RF %d (min ISR %d), flush=%s", clusterBrokers, clusterMinISR,
			map[bool]string{true: "always", false: "never"}[p.fsync])
		if p.slots > 0 {
			d += fmt.Sprintf(", %d fetch in flight per follower stream", p.slots)
		}
		return d
	case p.fsync:
		return "flush=always"
	default:
		return "flush=never"
	}
}

// unavailableReason is why p cannot run with this durability setting
// before anything is started, or "".
func (p *peer) unavailableReason() string {
	if p.spec.absent != "" {
		return p.spec.absent
	}
	if p.fsync && p.spec.memory {
		return "kfake keeps records in memory: there is nothing to fsync"
	}
	if p.spec.kafkaNodes > 0 {
		if err := kafkaref.Available(); err != nil {
			return err.Error()
		}
	}
	return ""
}

// freePort asks the kernel for a free loopback port. The port is passed to
// a child, which binds it a moment later; a clash makes the start fail
// and is retried.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// freePorts is n free ports, each as freePort finds it.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

const peerStartTimeout = 60 * time.Second

// start launches the peer's process. ringlog runs from the benchmarked
// binary with its own flags; kfake and NATS run in this executable
// re-invoked as `ringlog bench peer ...`, so that every peer is a process
// of its own whose CPU and memory are measured apart from the clients'.
func (p *peer) start(broker, workDir string) error {
	p.started = true
	if r := p.unavailableReason(); r != "" {
		p.err = errors.New(r)
		return p.err
	}
	p.dataDir = filepath.Join(workDir, p.id())
	if err := os.MkdirAll(p.dataDir, 0o755); err != nil {
		p.err = err
		return err
	}
	if p.spec.saslSSL {
		// Beside the data directory, not in it: the broker owns that.
		var err error
		if p.sec, err = newSASLSSL(filepath.Join(workDir, p.id()+"-tls")); err != nil {
			p.err = err
			return err
		}
	}
	if p.spec.acls > 0 {
		var err error
		if p.acl, err = newACLSetup(filepath.Join(workDir, p.id()+"-acl"), p.spec.acls); err != nil {
			p.err = err
			return err
		}
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = p.startOnce(broker); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	p.err = err
	return err
}

func (p *peer) startOnce(broker string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	switch {
	case p.spec.cluster:
		return p.startCluster(broker)
	case p.spec.kafkaNodes > 0:
		return p.startKafka()
	case p.spec.saslSSL:
		return p.startSASLSSL(broker)
	case p.spec.acls > 0:
		return p.startACLs(broker)
	case strings.HasPrefix(p.spec.key, "ringlog-"):
		adminPort, err := freePort()
		if err != nil {
			return err
		}
		io := strings.TrimPrefix(p.spec.key, "ringlog-")
		if p.spec.net != "" || p.spec.writes != "" {
			io = "uring"
		}
		flush := map[bool]string{true: "always", false: "never"}[p.fsync]
		admin := fmt.Sprintf("127.0.0.1:%d", adminPort)
		args := []string{"-listen", addr, "-data-dir", p.dataDir, "-admin", admin, "-io", io, "-flush", flush}
		switch {
		case p.spec.net != "":
			args = append(args, "-net", p.spec.net)
		case io == "uring":
			// The io_uring disk path with gnet's loops, the binary's
			// default network before 2026-12-04 (now io_uring's own,
			// the peer ringlog io_uring net): the reference keeps its
			// meaning across runs.
			args = append(args, "-net", "gnet")
		}
		if p.spec.writes != "" {
			args = append(args, "-writes", p.spec.writes)
		}
		// max.connections above the 10,000-connection workload's (see
		// idle.go): netpoll's default bound is 10,000.
		props := filepath.Join(filepath.Dir(p.dataDir), p.id()+".properties")
		if err := os.WriteFile(props, fmt.Appendf(nil, "max.connections=%d\n", connsMax), 0o644); err != nil {
			return err
		}
		args = append(args, "-config", props)
		c, started, err := startRinglog(p.id(), broker, args)
		if err != nil {
			return err
		}
		p.procs, p.addr, p.admins = []*child{c}, addr, []string{admin}
		p.settings = ringlogSettings(started, args[:len(args)-2]) + fmt.Sprintf("; max.connections=%d (netpoll's default is 10,000: "+
			"below the 10,000-connection workload's connections and its producers' metadata connections)", connsMax)
	case p.spec.key == "kfake":
		c, err := p.startPeerChild("kfake", "-port", strconv.Itoa(port))
		if err != nil {
			return err
		}
		p.procs, p.addr = []*child{c}, addr
		p.settings = fmt.Sprintf("franz-go pkg/kfake %s, 1 broker, records in memory", moduleVersion("github.com/twmb/franz-go/pkg/kfake"))
	case p.spec.nats:
		sync := map[bool]string{true: "always", false: "default"}[p.fsync]
		c, err := p.startPeerChild("nats", "-port", strconv.Itoa(port), "-dir", p.dataDir, "-sync", sync)
		if err != nil {
			return err
		}
		p.procs, p.addr = []*child{c}, "nats://"+addr
		syncText := "sync_interval 2m (NATS's default: block files fsynced every 2 minutes and when a block is full)"
		if p.fsync {
			syncText = "sync always (every write fsynced)"
		}
		p.settings = fmt.Sprintf("nats-server %s embedded, JetStream file storage, %s; one R1 stream per partition; client nats.go %s",
			moduleVersion("github.com/nats-io/nats-server/v2"), syncText, moduleVersion("github.com/nats-io/nats.go"))
	default:
		return fmt.Errorf("bench: no way to start %s", p.spec.key)
	}
	return nil
}

// selfExe returns the executable that serves `ringlog bench peer`: this
// one (a variable so that tests, which run inside a test binary, can point
// it at a built ringlog).
var selfExe = os.Executable

func (p *peer) startPeerChild(kind string, args ...string) (*child, error) {
	self, err := selfExe()
	if err != nil {
		return nil, err
	}
	return startChild(p.id(), self, append([]string{"bench", "peer", kind}, args...),
		func(l string) bool { return strings.HasPrefix(l, peerReadyLine) }, peerStartTimeout)
}

var logField = regexp.MustCompile(`(\w+)=("[^"]*"|\S+)`)

// ringlogSettings describes a ringlog broker from the flags it was given
// and the fields of its "ringlog started" log line.
func ringlogSettings(started string, args []string) string {
	fields := map[string]string{}
	for _, m := range logField.FindAllStringSubmatch(started, -1) {
		fields[m[1]] = strings.Trim(m[2], `"`)
	}
	s := "ringlog " + strings.Join(args[6:], " ") // -admin onwards would repeat ports; keep -io, -flush and -net
	if v, ok := fields["io"]; ok {
		s += fmt.Sprintf("; disk I/O %s (%s), network %s, flush %s, writes %s", v, fields["io_reason"], fields["network"], fields["flush"], fields["writes"])
	}
	return s + fmt.Sprintf("; shards = GOMAXPROCS = %d", runtime.NumCPU())
}

// moduleVersion is the version of a module linked into this binary.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "(unknown version)"
}

// stop stops the peer's processes (a cluster's all at once: stopped one
// after the other, the last ones would wait for a quorum that is leaving)
// and removes its data.
func (p *peer) stop() error {
	if p.kc != nil {
		// Every node at once, as for the ringlog cluster.
		p.kc.Stop()
		p.kc = nil
		os.RemoveAll(p.dataDir)
		return nil
	}
	if len(p.procs) == 0 {
		return nil
	}
	errs := make([]error, len(p.procs))
	var wg sync.WaitGroup
	for i, c := range p.procs {
		wg.Go(func() { errs[i] = c.stop() })
	}
	wg.Wait()
	p.procs = nil
	if p.dataDir != "" {
		os.RemoveAll(p.dataDir)
	}
	if p.sec != nil {
		os.RemoveAll(p.sec.dir)
	}
	if p.acl != nil {
		os.RemoveAll(p.acl.dir)
	}
	return errors.Join(errs...)
}

// usage is what the suite reads from a peer's process around a run.
type usage struct {
	cpu    time.Duration
	cpuSys time.Duration // of cpu, the kernel's (stime)
	cpuOK  bool
	// threads is each thread's CPU time (procThreadCPU) of every process,
	// by thread id, when threadsOK: the precise count cpu is taken from
	// when no thread exited during the run.
	threads   map[int]time.Duration
	threadsOK bool
	// requests is the broker's ringlog_requests_total where it has the
	// counter (requestsOK).
	requests   float64
	requestsOK bool
	sendfile   float64 // ringlog_fetch_sendfile_bytes_total
	copied     float64 // ringlog_fetch_copied_bytes_total
	fetchOK    bool
	client     time.Duration // this process's CPU: the clients
	// produceHist is the broker's Produce TotalTimeMs histogram, summed
	// over its processes, when produceHistOK.
	produceHist   []histBucket
	produceHistOK bool
}

// snapshot reads the peer's counters, summed over its processes; those it
// cannot read (from every process) are marked absent rather than guessed.
func (p *peer) snapshot(ctx context.Context) usage {
	u := usage{client: selfCPU()}
	pids := p.pids()
	if len(pids) == 0 {
		return u
	}
	u.cpuOK, u.threadsOK = true, true
	u.threads = map[int]time.Duration{}
	for _, pid := range pids {
		user, sys, err := procCPU(pid)
		u.cpu += user + sys
		u.cpuSys += sys
		u.cpuOK = u.cpuOK && err == nil
		ts, err := procThreadCPU(pid)
		u.threadsOK = u.threadsOK && err == nil
		maps.Copy(u.threads, ts)
	}
	u.fetchOK = len(p.admins) > 0
	u.requestsOK = len(p.admins) > 0
	u.produceHistOK = len(p.admins) > 0
	for _, a := range p.admins {
		var hist []histBucket
		m, err := readMetricsPage(ctx, a, func(r io.Reader) (map[string]float64, error) {
			page, err := io.ReadAll(io.LimitReader(r, 64<<20))
			if err != nil {
				return nil, err
			}
			if hist, err = parseHistogram(bytes.NewReader(page), brokerProduceHist, brokerProduceLabel); err != nil {
				return nil, err
			}
			return parseMetrics(bytes.NewReader(page))
		})
		if len(hist) == 0 {
			u.produceHistOK = false
		}
		if u.produceHistOK {
			if u.produceHist == nil {
				u.produceHist = hist
			} else if len(u.produceHist) != len(hist) {
				u.produceHistOK = false
			} else {
				for i := range hist {
					u.produceHist[i].count += hist[i].count
				}
			}
		}
		sf, ok1 := m["ringlog_fetch_sendfile_bytes_total"]
		cp, ok2 := m["ringlog_fetch_copied_bytes_total"]
		u.sendfile += sf
		u.copied += cp
		u.fetchOK = u.fetchOK && err == nil && ok1 && ok2
		rq, ok3 := m[requestsMetric]
		if !ok3 {
			// Labelled by API: every API's count.
			rq, ok3 = m[requestsMetric+"{}"]
		}
		u.requests += rq
		u.requestsOK = u.requestsOK && err == nil && ok3
	}
	return u
}

// resetPeakRSS starts a new peak RSS for each of the peer's processes.
func (p *peer) resetPeakRSS() {
	for _, pid := range p.pids() {
		procResetPeakRSS(pid)
	}
}

// peakRSS is the sum of the processes' peak RSS since resetPeakRSS: for a
// cluster an upper bound of the peak of the sum, as the brokers need not
// peak at the same moment.
func (p *peer) peakRSS() (int64, bool) {
	var sum int64
	pids := p.pids()
	for _, pid := range pids {
		rss, err := procPeakRSS(pid)
		if err != nil {
			return 0, false
		}
		sum += rss
	}
	return sum, len(pids) > 0
}

// startRinglog starts a ringlog broker child with args (-admin among them)
// and waits until its admin listener is up, which comes after the Kafka
// listener. started is its "ringlog started" log line, which says how it
// runs.
// startConfigured starts the benchmarked binary with the reference
// peer's I/O paths (ringlog io_uring) and a server.properties of its own,
// written to path, so that its rows differ from the reference's by that
// file alone; it sets the peer's process, client address and admin
// address, and returns the settings that describe it.
func (p *peer) startConfigured(broker, path, properties, clientAddr string, adminPort int) (c *child, settings string, err error) {
	if err := os.WriteFile(path, []byte(properties), 0o600); err != nil {
		return nil, "", err
	}
	admin := fmt.Sprintf("127.0.0.1:%d", adminPort)
	flush := map[bool]string{true: "always", false: "never"}[p.fsync]
	args := []string{"-config", path, "-data-dir", p.dataDir, "-admin", admin, "-io", "uring", "-net", "gnet", "-flush", flush}
	c, started, err := startRinglog(p.id(), broker, args)
	if err != nil {
		return nil, "", err
	}
	p.procs, p.addr, p.admins = []*child{c}, clientAddr, []string{admin}
	return c, ringlogSettings(started, args), nil
}

func startRinglog(name, broker string, args []string) (c *child, started string, err error) {
	c, err = startChild(name, broker, args, func(l string) bool {
		if strings.Contains(l, `msg="ringlog started"`) {
			started = l
		}
		return strings.Contains(l, `msg="admin HTTP"`)
	}, peerStartTimeout)
	return c, started, err
}

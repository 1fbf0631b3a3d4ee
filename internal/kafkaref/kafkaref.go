// Package kafkaref runs Apache Kafka itself beside ringlog: the reference
// peer of the benchmark suite and the oracle of the differential tests. It
// fetches Kafka's jars once with Maven (pom.xml, embedded, copied with
// `mvn dependency:copy-dependencies` into a cache folder), formats KRaft
// storage and starts a cluster of combined broker-and-controller nodes as
// Java processes on 127.0.0.1.
//
// Nothing here is used by the broker: the bench command and tests import
// it. It needs java and mvn on PATH; Available says why not when they are
// missing, and a test that needs Kafka fails with that reason (Start
// returns it), never skips.
package kafkaref

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Version is the Kafka release the pom names.
const Version = "4.4.0"

//go:embed pom.xml
var pom []byte

// Available reports whether java and mvn are on PATH.
func Available() error {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("kafkaref: %s not found on PATH (Apache Kafka %s needs Java 17 and Maven): %w", tool, Version, err)
		}
	}
	return nil
}

var (
	jarsMu  sync.Mutex
	jarsDir string
)

// Jars returns the folder holding Kafka's jars and their dependencies (a
// classpath of dir/*), copying them there with Maven the first time. The
// folder is RINGLOG_KAFKA_CACHE when set, else under the user's cache
// folder, named by the pom's hash so that a changed pom fetches anew.
// Processes that fetch at once each copy into a folder of their own and
// the first rename wins.
func Jars() (string, error) {
	jarsMu.Lock()
	defer jarsMu.Unlock()
	if jarsDir != "" {
		return jarsDir, nil
	}
	if err := Available(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(pom)
	base := os.Getenv("RINGLOG_KAFKA_CACHE")
	if base == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("kafkaref: no cache folder (set RINGLOG_KAFKA_CACHE): %w", err)
		}
		base = filepath.Join(cache, "ringlog")
	}
	dir := filepath.Join(base, "kafka-"+Version+"-"+hex.EncodeToString(sum[:6]))
	if complete(dir) {
		jarsDir = dir
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("kafkaref: %w", err)
	}
	tmp, err := os.MkdirTemp(base, "fetch-")
	if err != nil {
		return "", fmt.Errorf("kafkaref: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "pom.xml"), pom, 0o644); err != nil {
		return "", fmt.Errorf("kafkaref: %w", err)
	}
	libs := filepath.Join(tmp, "libs")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", filepath.Join(tmp, "pom.xml"),
		"dependency:copy-dependencies", "-DoutputDirectory="+libs)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kafkaref: fetching Apache Kafka %s's jars with Maven: %v\n%s", Version, err, tail(out, 4000))
	}
	if err := os.WriteFile(filepath.Join(libs, ".complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("kafkaref: %w", err)
	}
	if err := os.Rename(libs, dir); err != nil && !complete(dir) {
		return "", fmt.Errorf("kafkaref: %w", err)
	}
	jarsDir = dir
	return dir, nil
}

func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ".complete"))
	return err == nil
}

// Options shape a cluster. The zero value is one node with Kafka's
// defaults and the heap and collector of Kafka's start script.
type Options struct {
	// Dir holds each node's config, data and log (node-<id>/, emptied
	// when the node is formatted); required.
	Dir string
	// Nodes is how many combined broker-and-controller nodes (default 1).
	Nodes int
	// Heap is -Xms and -Xmx (default "1g", as kafka-server-start.sh).
	Heap string
	// Props are broker settings added to (or replacing) the defaults below.
	Props map[string]string
	// StartTimeout bounds the wait for every node to serve (default 120 s:
	// three JVMs starting on two busy cores have taken over 90 s).
	StartTimeout time.Duration
	// PlainUsers, when set, gives every node a SASL_PLAINTEXT listener
	// (Node.SASLAddr) offering PLAIN with these users and passwords, as
	// Kafka's PlainLoginModule reads them from the listener's JAAS
	// config. Inter-broker and controller traffic stays on PLAINTEXT.
	PlainUsers map[string]string
}

// JVMFlags are the flags of Kafka's kafka-run-class.sh for a broker, which
// every node runs with after -Xms and -Xmx.
var JVMFlags = []string{"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
	"-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"}

// Node is one Kafka process.
type Node struct {
	ID   int
	Addr string // the PLAINTEXT listener, 127.0.0.1:port
	// SASLAddr is the SASL_PLAINTEXT listener (Options.PlainUsers), or "".
	SASLAddr string
	dir      string
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // how the process ended, once done is closed
}

// Pid is the node's process id (for CPU and memory readings in /proc).
func (n *Node) Pid() int { return n.cmd.Process.Pid }

// Log returns the tail of what the node printed.
func (n *Node) Log() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "kafka.log"))
	return string(tail(b, 8000))
}

// Cluster is a running Kafka cluster.
type Cluster struct {
	Nodes []*Node
	props map[string]string
	heap  string
	once  sync.Once
	// startTimeout is Options.StartTimeout, for the error of a cluster
	// that did not form.
	startTimeout time.Duration
}

// Bootstrap is the nodes' addresses, comma-separated.
func (c *Cluster) Bootstrap() string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	return strings.Join(addrs, ",")
}

// Settings describes the cluster for a report: version, nodes, JVM and the
// broker settings that differ from Kafka's defaults or matter to a reader
// of figures (the log.flush.* defaults, the thread counts).
func (c *Cluster) Settings() string {
	keys := make([]string, 0, len(c.props))
	for k := range c.props {
		if !strings.Contains(k, "listener") && k != "log.dirs" && k != "node.id" && k != "controller.quorum.voters" && k != "process.roles" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var kv []string
	for _, k := range keys {
		kv = append(kv, k+"="+c.props[k])
	}
	flush := "log.flush.interval.messages and log.flush.interval.ms at Kafka's defaults (never forced: the page cache, as ringlog -flush never); "
	if c.props["log.flush.interval.messages"] != "" || c.props["log.flush.interval.ms"] != "" {
		flush = "" // the settings below say how the log is flushed
	}
	return fmt.Sprintf("Apache Kafka %s (KRaft), %d combined broker+controller node(s), %s; JVM -Xms%s -Xmx%s %s; %s%s",
		Version, len(c.Nodes), javaVersion(), c.heap, c.heap, strings.Join(JVMFlags, " "), flush, strings.Join(kv, " "))
}

// defaults are the settings every node gets, before Options.Props: one
// node holds every internal topic, groups start at once, and the thread
// counts are Kafka's own defaults, written down for the report.
var defaults = map[string]string{
	"num.network.threads":                          "3",
	"num.io.threads":                               "8",
	"num.partitions":                               "1",
	"group.initial.rebalance.delay.ms":             "0",
	"offsets.topic.num.partitions":                 "50",
	"transaction.state.log.num.partitions":         "50",
	"auto.create.topics.enable":                    "true",
	"share.coordinator.state.topic.num.partitions": "50",
}

// Start formats and starts a cluster and waits until every node serves
// metadata naming all of them. A node that cannot start (no Java, a port
// taken, a bad setting) fails Start with its log; what started is stopped.
func Start(opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("kafkaref: Options.Dir is required")
	}
	opts.Nodes = max(opts.Nodes, 1)
	if opts.Heap == "" {
		opts.Heap = "1g"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 120 * time.Second
	}
	jars, err := Jars()
	if err != nil {
		return nil, err
	}
	// A port taken between freePort and the node's bind makes that node
	// exit; a cluster that does not form in time on a loaded machine gets
	// one more chance. Each attempt starts from empty node folders.
	timeouts := 0
	for attempt := 0; ; attempt++ {
		c, err := start(opts, jars)
		if err == nil || attempt == 3 {
			return c, err
		}
		switch {
		case strings.Contains(err.Error(), "Address already in use"):
		case errors.Is(err, errNotServing) && timeouts == 0:
			timeouts++
		default:
			return c, err
		}
	}
}

// errNotServing marks a cluster that did not form by the deadline.
var errNotServing = errors.New("not serving by the deadline")

func start(opts Options, jars string) (_ *Cluster, err error) {
	rf := strconv.Itoa(min(opts.Nodes, 3))
	c := &Cluster{heap: opts.Heap, startTimeout: opts.StartTimeout, props: map[string]string{
		"offsets.topic.replication.factor":                 rf,
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    strconv.Itoa(min(opts.Nodes, 2)),
		"share.coordinator.state.topic.replication.factor": rf,
		"share.coordinator.state.topic.min.isr":            strconv.Itoa(min(opts.Nodes, 2)),
	}}
	// What started is stopped when a later node cannot start.
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for k, v := range defaults {
		c.props[k] = v
	}
	for k, v := range opts.Props {
		c.props[k] = v
	}
	var voters []string
	ports := make([][3]string, opts.Nodes)
	for i := range opts.Nodes {
		for j := range 3 {
			p, err := freePort()
			if err != nil {
				return nil, err
			}
			ports[i][j] = p
		}
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%s", i+1, ports[i][1]))
	}
	clusterID, err := java(jars, "kafka.tools.StorageTool", "random-uuid")
	if err != nil {
		return nil, fmt.Errorf("kafkaref: a cluster id: %w", err)
	}
	clusterID = strings.TrimSpace(clusterID)
	for i := range opts.Nodes {
		n := &Node{ID: i + 1, Addr: "127.0.0.1:" + ports[i][0], dir: filepath.Join(opts.Dir, fmt.Sprintf("node-%d", i+1)), done: make(chan struct{})}
		props := map[string]string{
			"process.roles":                  "broker,controller",
			"node.id":                        strconv.Itoa(n.ID),
			"controller.quorum.voters":       strings.Join(voters, ","),
			"listeners":                      fmt.Sprintf("PLAINTEXT://127.0.0.1:%s,CONTROLLER://127.0.0.1:%s", ports[i][0], ports[i][1]),
			"advertised.listeners":           "PLAINTEXT://" + n.Addr,
			"controller.listener.names":      "CONTROLLER",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"inter.broker.listener.name":     "PLAINTEXT",
			"log.dirs":                       filepath.Join(n.dir, "data"),
		}
		if len(opts.PlainUsers) > 0 {
			n.SASLAddr = "127.0.0.1:" + ports[i][2]
			props["listeners"] += ",SASL_PLAINTEXT://" + n.SASLAddr
			props["advertised.listeners"] += ",SASL_PLAINTEXT://" + n.SASLAddr
			props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
			props["sasl.enabled.mechanisms"] = "PLAIN"
			users := slices.Sorted(maps.Keys(opts.PlainUsers))
			jaas := "org.apache.kafka.common.security.plain.PlainLoginModule required"
			for _, u := range users {
				jaas += fmt.Sprintf(" user_%s=%q", u, opts.PlainUsers[u])
			}
			props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = jaas + ";"
		}
		for k, v := range c.props {
			props[k] = v
		}
		if err := os.RemoveAll(n.dir); err != nil {
			return nil, fmt.Errorf("kafkaref: %w", err)
		}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, fmt.Errorf("kafkaref: %w", err)
		}
		config := filepath.Join(n.dir, "server.properties")
		if err := os.WriteFile(config, properties(props), 0o644); err != nil {
			return nil, fmt.Errorf("kafkaref: %w", err)
		}
		if err := os.WriteFile(filepath.Join(n.dir, "log4j2.yaml"), log4j, 0o644); err != nil {
			return nil, fmt.Errorf("kafkaref: %w", err)
		}
		if out, err := java(jars, "kafka.tools.StorageTool", "format", "-t", clusterID, "-c", config); err != nil {
			return nil, fmt.Errorf("kafkaref: formatting node %d: %w\n%s", n.ID, err, out)
		}
		logf, err := os.Create(filepath.Join(n.dir, "kafka.log"))
		if err != nil {
			return nil, fmt.Errorf("kafkaref: %w", err)
		}
		args := append([]string{"-Xms" + opts.Heap, "-Xmx" + opts.Heap}, JVMFlags...)
		args = append(args, "-Dlog4j2.configurationFile="+filepath.Join(n.dir, "log4j2.yaml"),
			"-cp", filepath.Join(jars, "*"), "kafka.Kafka", config)
		n.cmd = exec.Command("java", args...)
		n.cmd.Stdout, n.cmd.Stderr = logf, logf
		n.cmd.SysProcAttr = sysProcAttr()
		if err := n.cmd.Start(); err != nil {
			logf.Close()
			return nil, fmt.Errorf("kafkaref: starting node %d: %w", n.ID, err)
		}
		go func() {
			n.err = n.cmd.Wait()
			logf.Close()
			close(n.done)
		}()
		c.Nodes = append(c.Nodes, n)
	}
	deadline := time.Now().Add(opts.StartTimeout)
	for _, n := range c.Nodes {
		if err := c.waitServing(n, deadline); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// waitServing waits until n answers a Metadata request that names every
// node of the cluster. Any node that exits meanwhile ends the wait with its
// log (a node whose port was taken exits, and Start tries again); by the
// deadline, the error carries the log of every node.
func (c *Cluster) waitServing(n *Node, deadline time.Time) error {
	for {
		for _, o := range c.Nodes {
			select {
			case <-o.done:
				return fmt.Errorf("kafkaref: node %d exited while starting (%v):\n%s", o.ID, o.err, o.Log())
			default:
			}
		}
		if brokers, err := brokerCount(n.Addr); err == nil && brokers == len(c.Nodes) {
			return nil
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, o := range c.Nodes {
				fmt.Fprintf(&logs, "\n-- node %d (%s) log:\n%s", o.ID, o.Addr, tail([]byte(o.Log()), 3000))
			}
			return fmt.Errorf("kafkaref: node %d %w (%d-node cluster, %s)%s", n.ID, errNotServing, len(c.Nodes), c.startTimeout, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func brokerCount(addr string) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	return len(resp.Brokers), nil
}

// Stop stops every node (SIGTERM, then SIGKILL after 30 s) and waits for
// them. It may be called more than once.
func (c *Cluster) Stop() {
	c.once.Do(func() {
		for _, n := range c.Nodes {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, n := range c.Nodes {
			select {
			case <-n.done:
			case <-time.After(30 * time.Second):
				_ = n.cmd.Process.Kill()
				<-n.done
			}
		}
	})
}

// Kill ends node id at once (SIGKILL), as a crash would, and waits for it.
func (c *Cluster) Kill(id int) {
	for _, n := range c.Nodes {
		if n.ID == id {
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
}

// log4j keeps the broker's own log to warnings and errors.
var log4j = []byte(`Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
`)

func properties(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, m[k])
	}
	return b.Bytes()
}

// java runs a Kafka main class to its end and returns its standard output.
func java(jars string, class string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", append([]string{"-cp", filepath.Join(jars, "*"), class}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", class, strings.Join(args, " "), err, tail(stderr.Bytes(), 4000))
	}
	return string(out), nil
}

// Tool runs one of Kafka's command-line tools (a main class of the
// kafka-tools or kafka_2.13 jar, as bin/kafka-*.sh do) and returns its
// standard output and standard error together.
func Tool(ctx context.Context, class string, args ...string) (string, error) {
	jars, err := Jars()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "java", append([]string{"-Xmx256m", "-cp", filepath.Join(jars, "*"), class}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	javaOnce sync.Once
	javaVer  string
)

func javaVersion() string {
	javaOnce.Do(func() {
		out, err := exec.Command("java", "-version").CombinedOutput()
		javaVer = "java unknown"
		if err == nil {
			if line, _, _ := strings.Cut(string(out), "\n"); line != "" {
				javaVer = strings.TrimSpace(line)
			}
		}
	})
	return javaVer
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/testkit"
)

// testCluster is broker processes of the binary on loopback, each a voter
// of the metadata quorum with its own data directory, Kafka listener and
// admin listener (metrics), all with one server.properties.
type testCluster struct {
	t      *testing.T
	procs  []*proc
	addrs  []string // Kafka listeners, by index (node id - 1)
	admins []string // admin listeners (metrics), by index
}

// startCluster starts n brokers (node ids 1..n) with the settings in props
// and waits until each of them lists all n in its Metadata: the internal
// topics, created at the first request that needs them, get replicas only
// on the brokers registered by then.
func startCluster(t *testing.T, n int, props string) *testCluster {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t}
	var voters, dirs []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, testkit.FreeAddr(t)))
		c.addrs = append(c.addrs, testkit.FreeAddr(t))
		c.admins = append(c.admins, testkit.FreeAddr(t))
		dirs = append(dirs, t.TempDir())
	}
	args := func(i int) []string {
		return []string{"-node-id", strconv.Itoa(i + 1), "-controller-voters", strings.Join(voters, ","),
			"-config", conf, "-listen", c.addrs[i], "-admin", c.admins[i], "-data-dir", dirs[i]}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range c.procs {
				out := p.out.String()
				t.Logf("broker %d, last lines:\n%s", i+1, out[max(0, len(out)-6000):])
			}
		}
	})
	// All at once: a broker serves once a quorum of voters is up.
	for i := range n {
		c.procs = append(c.procs, start(t, args(i)...))
	}
	for i := range n {
		// A free port may be taken by another process (another package's
		// broker) before the broker binds it: start it again on others.
		for attempt := 1; !c.serving(i); attempt++ {
			if attempt == 3 {
				t.Fatalf("broker %d found its ports taken three times:\n%s", i+1, c.procs[i].out)
			}
			t.Logf("broker %d: a port was taken before it bound it; starting it again on others", i+1)
			c.addrs[i], c.admins[i] = testkit.FreeAddr(t), testkit.FreeAddr(t)
			c.procs[i] = start(t, args(i)...)
		}
	}
	for i, addr := range c.addrs {
		c.waitBrokers(i+1, addr, n)
	}
	return c
}

// serving waits until broker i serves its Kafka and admin listeners (the
// admin listener is bound last), and says false if it exited because an
// address was in use; any other exit, or 30 s without either, fails the
// test.
func (c *testCluster) serving(i int) bool {
	c.t.Helper()
	p := c.procs[i]
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(p.out.String(), `msg="admin HTTP"`) {
			return true
		}
		select {
		case err := <-p.done:
			p.done <- err
			if strings.Contains(p.out.String(), "address already in use") {
				return false
			}
			c.t.Fatalf("broker %d exited (%v) before serving:\n%s", i+1, err, p.out)
		default:
		}
	}
	c.t.Fatalf("broker %d not serving after 30 s:\n%s", i+1, p.out)
	return false
}

// waitBrokers waits until the broker at addr lists n brokers in its
// Metadata.
func (c *testCluster) waitBrokers(id int, addr string, n int) {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cancel()
		if err == nil && len(resp.Brokers) == n {
			return
		}
		last = fmt.Sprintf("%v", err)
		if err == nil {
			last = fmt.Sprintf("%d brokers", len(resp.Brokers))
		}
	}
	c.t.Fatalf("broker %d does not list %d brokers after 30 s (its last answer: %s)", id, n, last)
}

// requests sums the brokers' ringlog_requests_total for api, read from
// their metrics.
func (c *testCluster) requests(api string) int {
	c.t.Helper()
	re := regexp.MustCompile(`(?m)^ringlog_requests_total\{api="` + regexp.QuoteMeta(api) + `"\} (\S+)$`)
	total := 0
	for i, admin := range c.admins {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			c.t.Fatalf("broker %d's metrics: %v", i+1, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			c.t.Fatalf("broker %d's metrics: %v", i+1, err)
		}
		if m := re.FindSubmatch(body); m != nil {
			n, err := strconv.ParseFloat(string(m[1]), 64)
			if err != nil {
				c.t.Fatalf("broker %d's metrics: %s: %v", i+1, m[0], err)
			}
			total += int(n)
		}
	}
	return total
}

// stop stops every broker with SIGTERM, all at once (one by one, the last
// ones would wait for a quorum that is gone), and fails the test unless
// each exits cleanly.
func (c *testCluster) stop() {
	c.t.Helper()
	for _, p := range c.procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, p := range c.procs {
		if err := p.stop(c.t); err != nil {
			c.t.Fatalf("broker %d's exit after SIGTERM: %v", i+1, err)
		}
	}
}

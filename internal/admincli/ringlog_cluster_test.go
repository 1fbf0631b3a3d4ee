package admincli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/broker"
	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
)

// startRinglogCluster starts n in-process brokers (ids 1..n, broker.Start
// as the binary runs it) that form one metadata quorum, and closes them at
// the end of the test (those still running), with the registry of each
// one's metrics.
func startRinglogCluster(t *testing.T, n int) ([]*broker.Broker, []*prometheus.Registry, []broker.Config) {
	t.Helper()
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, testkit.FreeAddr(t)))
	}
	brokers := make([]*broker.Broker, n)
	regs := make([]*prometheus.Registry, n)
	cfgs := make([]broker.Config, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cfg := testbroker.Config(t.TempDir())
		cfg.NodeID = int32(i + 1)
		cfg.Cluster.Voters = strings.Join(voters, ",")
		cfg.Cluster.LagTimeMax, cfg.Cluster.SessionTimeout, cfg.Cluster.HeartbeatInterval = 2*time.Second, 2*time.Second, 300*time.Millisecond
		regs[i] = prometheus.NewRegistry()
		cfg.Metrics = regs[i]
		cfgs[i] = cfg
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			brokers[i], errs[i] = broker.Start(ctx, cfg)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, b := range brokers {
			if b != nil {
				b.Close(ctx)
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start broker %d: %v", i+1, err)
		}
	}
	return brokers, regs, cfgs
}

// gaugeSum adds up a gauge over the registries given.
func gaugeSum(t *testing.T, name string, regs ...*prometheus.Registry) float64 {
	t.Helper()
	var sum float64
	for _, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					sum += m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// adminTry runs Main with --json and decodes its output into v, returning
// the command's error (for checks retried until the brokers agree).
func adminTry(t *testing.T, addr string, v any, args ...string) error {
	t.Helper()
	out, errOut, err := admin(t, addr, append(args, "--json")...)
	if err != nil {
		return fmt.Errorf("%w: %s", err, errOut)
	}
	return json.Unmarshal([]byte(out), v)
}

// TestPartitionReassignRinglogCluster runs the reassignment commands of
// TestAgainstKafka against three ringlog brokers: a plan file swapping a
// partition's replicas, waited for with --list, then a preferred election
// moving its leadership; everything of the topic moved off broker 1
// (--move-off 1), then spread back (--spread); then a move to a broker
// that is down: --list shows it in progress with its adding and removing
// replicas (and its leader counts it in ReassigningPartitions), --cancel
// stops it, and a second --cancel finds none; a partition moved off the
// broker while it is down has its log emptied there when it returns.
func TestPartitionReassignRinglogCluster(t *testing.T) {
	brokers, regs, cfgs := startRinglogCluster(t, 3)
	addr := brokers[0].Addr()
	adminOK(t, addr, "topic", "create", "ref", "-p", "4", "-r", "2")
	var described struct {
		Topics []topicDescription `json:"topics"`
	}
	eventually(t, func() error {
		if err := adminTry(t, addr, &described, "topic", "describe", "ref"); err != nil {
			return err
		}
		for _, p := range described.Topics[0].Partitions {
			if len(p.ISR) != 2 {
				return fmt.Errorf("ref/%d: ISR %v", p.Partition, p.ISR)
			}
		}
		return nil
	})
	p0 := described.Topics[0].Partitions[0]
	swapped := []int32{p0.Replicas[1], p0.Replicas[0]}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	b, _ := json.Marshal(Plan{Version: 1, Partitions: []Assignment{{Topic: "ref", Partition: 0, Replicas: swapped}}})
	if err := os.WriteFile(planFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var re reassignOut
	// Retried: the command's Metadata may reach a broker that has not
	// applied the topic yet (the plan is checked against it first).
	eventually(t, func() error {
		return adminTry(t, addr, &re, "partition", "reassign", "--file", planFile, "--execute")
	})
	if !re.Executed || len(re.Results) != 1 || re.Results[0].Status != "started" {
		t.Fatalf("reassign --file: %+v", re)
	}
	waitReassigned(t, addr)
	var elect struct {
		Partitions []partitionResult `json:"partitions"`
	}
	adminJSON(t, addr, &elect, "partition", "elect", "--topic", "ref:0", "--type", "preferred")
	if len(elect.Partitions) != 1 || elect.Partitions[0].Status != "elected" {
		t.Fatalf("preferred election after the swap: %+v", elect)
	}
	eventually(t, func() error {
		if err := adminTry(t, addr, &described, "topic", "describe", "ref"); err != nil {
			return err
		}
		if p := described.Topics[0].Partitions[0]; p.Leader != swapped[0] || fmt.Sprint(p.Replicas) != fmt.Sprint(swapped) {
			return fmt.Errorf("ref/0 after the election: %+v, want replicas %v led by %d", p, swapped, swapped[0])
		}
		return nil
	})

	load := func() map[int32]int {
		adminJSON(t, addr, &described, "topic", "describe", "ref")
		m := map[int32]int{}
		for _, p := range described.Topics[0].Partitions {
			for _, r := range p.Replicas {
				m[r]++
			}
		}
		return m
	}
	adminJSON(t, addr, &re, "partition", "reassign", "--move-off", "1", "--topic", "ref", "--execute")
	if !re.Executed || len(re.Results) == 0 {
		t.Fatalf("move-off 1: %+v", re)
	}
	waitReassigned(t, addr)
	eventually(t, func() error {
		if l := load(); l[1] != 0 || l[2]+l[3] != 8 {
			return fmt.Errorf("replicas per broker after move-off 1: %v", l)
		}
		return nil
	})
	adminJSON(t, addr, &re, "partition", "reassign", "--spread", "--topic", "ref", "--execute")
	waitReassigned(t, addr)
	eventually(t, func() error {
		if l := load(); l[1] < 2 || l[2] < 2 || l[3] < 2 || l[1] > 3 || l[2] > 3 || l[3] > 3 {
			return fmt.Errorf("replicas per broker after --spread: %v (8 over 3: 2 or 3 each)", l)
		}
		return nil
	})

	// A move to a broker that is down stays in progress: --list shows it
	// with its adding and removing replicas, --cancel stops it. The
	// broker closed is not the controller (that would cost an election).
	var st clusterStatusOut
	adminJSON(t, addr, &st, "cluster", "status")
	down := int32(3)
	if down == st.Controller {
		down = 2
	}
	adminJSON(t, addr, &described, "topic", "describe", "ref")
	var moving Assignment
	var original []int32
	for _, p := range described.Topics[0].Partitions {
		if !slices.Contains(p.Replicas, down) {
			original = p.Replicas
			moving = Assignment{Topic: "ref", Partition: p.Partition, Replicas: []int32{p.Replicas[0], down}}
			break
		}
	}
	if moving.Replicas == nil {
		t.Fatalf("every partition of ref has a replica on broker %d: %+v", down, described)
	}
	// Records on every partition, so that the replicas on the broker
	// about to go down hold some (see the end).
	produce(t, addr, "ref", 4, 20)
	var gone int32 = -1 // a partition of ref on down, moved off while it is away
	for _, p := range described.Topics[0].Partitions {
		if slices.Contains(p.Replicas, down) {
			gone = p.Partition
			break
		}
	}
	downDir := cfgs[down-1].DataDir
	eventually(t, func() error {
		if n := testkit.LogBytes(t, filepath.Join(downDir, fmt.Sprintf("ref-%d", gone))); n == 0 {
			return fmt.Errorf("broker %d holds nothing of ref-%d yet", down, gone)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := brokers[down-1].Close(ctx); err != nil {
		t.Fatal(err)
	}
	brokers[down-1] = nil
	// The command refuses a plan naming a broker Metadata does not list
	// (one that is down), as Kafka's tool does: the move is started with
	// the protocol directly.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign("ref", moving.Partition, moving.Replicas)
	resps, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("reassign to the broker that is down: %v", err)
	}
	// --cancel names the partition with a plan of live brokers: its
	// original replicas.
	if err := os.WriteFile(planFile, must(json.Marshal(Plan{Version: 1, Partitions: []Assignment{{Topic: "ref", Partition: moving.Partition, Replicas: original}}})), 0o600); err != nil {
		t.Fatal(err)
	}
	var l struct {
		Reassignments []ongoing `json:"reassignments"`
	}
	adminJSON(t, addr, &l, "partition", "reassign", "--list")
	if len(l.Reassignments) != 1 || l.Reassignments[0].Partition != moving.Partition ||
		fmt.Sprint(l.Reassignments[0].AddingReplicas) != fmt.Sprint([]int32{down}) || len(l.Reassignments[0].RemovingReplicas) != 1 {
		t.Fatalf("--list during the move: %+v", l)
	}
	// The partition's leader counts it in Kafka's ReassigningPartitions.
	const reassigningGauge = "kafka_server_replicamanager_reassigningpartitions"
	live := slices.Delete(slices.Clone(regs), int(down-1), int(down))
	eventually(t, func() error {
		if v := gaugeSum(t, reassigningGauge, live...); v != 1 {
			return fmt.Errorf("%s summed over the live brokers: %v, want 1", reassigningGauge, v)
		}
		return nil
	})
	text := adminOK(t, addr, "partition", "reassign", "--list")
	if !strings.Contains(text, "ADDING") || !strings.Contains(text, "ref") {
		t.Fatalf("--list table:\n%s", text)
	}
	var cancelled struct {
		Partitions []partitionResult `json:"partitions"`
	}
	adminJSON(t, addr, &cancelled, "partition", "reassign", "--cancel", "--file", planFile)
	if len(cancelled.Partitions) != 1 || cancelled.Partitions[0].Status != "cancelled" {
		t.Fatalf("--cancel: %+v", cancelled)
	}
	waitReassigned(t, addr)
	eventually(t, func() error {
		if v := gaugeSum(t, reassigningGauge, live...); v != 0 {
			return fmt.Errorf("%s after the cancel: %v", reassigningGauge, v)
		}
		return nil
	})
	// A second cancel: nothing in progress, Kafka's error.
	if _, _, err := admin(t, addr, "partition", "reassign", "--cancel", "--file", planFile); err == nil || !strings.Contains(err.Error(), "NO_REASSIGNMENT_IN_PROGRESS") {
		t.Fatalf("second --cancel: %v", err)
	}

	// A partition moved off the broker while it is down: when it comes
	// back, it empties its log of it (it still hosts the topic's others).
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != down {
			others = append(others, id)
		}
	}
	if err := os.WriteFile(planFile, must(json.Marshal(Plan{Version: 1, Partitions: []Assignment{{Topic: "ref", Partition: gone, Replicas: others}}})), 0o600); err != nil {
		t.Fatal(err)
	}
	adminJSON(t, addr, &re, "partition", "reassign", "--file", planFile, "--execute")
	waitReassigned(t, addr)
	restart := cfgs[down-1]
	restart.Metrics = prometheus.NewRegistry() // a registry takes a collector once
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	back, err := broker.Start(rctx, restart)
	if err != nil {
		t.Fatalf("restart broker %d: %v", down, err)
	}
	brokers[down-1] = back
	eventually(t, func() error {
		if n := testkit.LogBytes(t, filepath.Join(downDir, fmt.Sprintf("ref-%d", gone))); n != 0 {
			return fmt.Errorf("broker %d back: %d bytes of ref-%d, moved off it while it was down", down, n, gone)
		}
		return nil
	})
	held := 0
	for i := range int32(4) {
		if testkit.LogBytes(t, filepath.Join(downDir, fmt.Sprintf("ref-%d", i))) > 0 {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("broker %d back holds none of ref's records: it should keep its other replicas", down)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

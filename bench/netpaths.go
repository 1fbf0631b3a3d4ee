package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Issue 13 moves ringlog's network onto io_uring. Its targets compare the
// broker that runs both its disk and its network on io_uring (the peer
// ringlog-net-uring: -io uring -net uring) with the portable path
// (ringlog-portable: -io portable, the net package and pwrite) and with
// kfake, in one run. The peer ringlog-uring stays what it was, the
// io_uring disk path with the gnet (epoll) network, -io uring's default,
// and every ratio of the tables is still taken against it.

// netPathsPeers are the peers of issue 13's own workloads (workload's
// netPaths): those its targets compare. kfake is one for the 100 B
// workload only: the end-to-end target is against ringlog portable alone.
func netPathsPeers(w workload) []string {
	if connsWorkload(w) {
		// The target is io_uring net's own ratio; the epoll and portable
		// paths beside it say what an idle connection costs elsewhere.
		return []string{netUringPeer, netLoopsPeer, referencePeer, portablePeer}
	}
	if w.kind == kindE2E {
		return []string{netUringPeer, netLoopsPeer, portablePeer}
	}
	return []string{netUringPeer, netLoopsPeer, portablePeer, "kfake"}
}

// netPathsReason is why the other peers' rows of those workloads are not
// measured.
func netPathsReason(w workload) string {
	var names []string
	for _, k := range netPathsPeers(w) {
		spec, _ := peerSpecByKey(k)
		names = append(names, spec.name)
	}
	return "issue 13's own workload: it runs on the peers its targets compare only (" + strings.Join(names, ", ") + ")"
}

// netUringReason is why ringlog io_uring net's other rows are not
// measured.
const netUringReason = "ringlog io_uring net runs the workloads of issue 13's targets only (1 KiB produce, 16 partitions, " +
	"2 producers; 100 B from 1 producer; consume from the page cache with kgo; open loop at the fixed rate)"

// netPathsWorkload is true for the workloads issue 13's targets read:
// the base produce run, consume from the page cache (its kgo part),
// produce latency at the fixed rate, and the issue's own workloads.
func netPathsWorkload(w workload) bool {
	return w.netPaths || w.main || baseLike(kindConsume, 1024, false)(w) ||
		fixedRateLike(kindLatency, 1024, false, fixedLatencyRate)(w)
}

// netPathSpecs are the ringlog peers whose network path the system call
// table compares: gnet (ringlog io_uring), io_uring and portable.
var netPathSpecs = []string{referencePeer, netUringPeer, netLoopsPeer, portablePeer}

// countsSyscalls is true when a run of w on p counts the broker's system
// calls: on a single ringlog broker of netPathSpecs, in the workloads of
// issue 13 (perf attaches for every run of them only: it takes a moment
// to attach and costs each system call a little).
func countsSyscalls(w workload, p *peer) bool {
	return netPathsWorkload(w) && slices.Contains(netPathSpecs, p.spec.key) && !p.fsync && len(p.pids()) == 1
}

// requestsMetric is the broker's count of requests served, read from its
// /metrics when it has it (summed over its api label); without it the requests are those the
// suite's kgo clients wrote (kgo's HookBrokerWrite), the same requests
// seen from the other end.
const requestsMetric = "ringlog_requests_total"

// syscallCounter is `perf stat -e raw_syscalls:sys_enter -p <pid>` over
// one measured stretch: every system call of every thread of the broker.
// There is no cheaper honest source: /proc/<pid>/io counts read- and
// write-like calls only (no io_uring_enter, epoll_pwait or futex).
type syscallCounter struct {
	cmd *exec.Cmd
	ctl *os.File // perf's control pipe (startPerf)
	out bytes.Buffer
	err error
}

// perfAttach bounds perf's start: attached to every thread of the
// broker and its events enabled. On a loaded machine (the suite's other
// packages beside the bench's test) perf can take longer than the fixed
// 100 ms it was given before, and a -quick run's measurement of a second
// or two could end before perf had recorded anything.
const perfAttach = 30 * time.Second

// startPerf starts perf (args: its subcommand and options) with its events
// disabled (-D -1) and a control pipe (--control fd:3,4), then enables them
// and waits for perf's ack: what it counts starts once it has attached,
// however long that takes, and before the load the caller starts next.
// It returns the running command and the control pipe's end, to be closed
// once perf has ended (perf record ends, its file unwritten, when the pipe
// closes under it), or an error (perf killed) when perf could not start or
// did not answer within perfAttach.
func startPerf(ctx context.Context, path string, args []string, stdout, stderr io.Writer) (*exec.Cmd, *os.File, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, nil, err
	}
	defer ackR.Close()
	argv := append([]string{args[0], "-D", "-1", "--control", "fd:3,4"}, args[1:]...)
	cmd := exec.Command(path, argv...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = []*os.File{ctlR, ackW}
	setParentDeathSignal(cmd)
	err = cmd.Start()
	ctlR.Close()
	ackW.Close()
	if err != nil {
		ctlW.Close()
		return nil, nil, err
	}
	acked := make(chan error, 1)
	go func() {
		if _, err := ctlW.WriteString("enable\n"); err != nil {
			acked <- err
			return
		}
		ack := make([]byte, 4)
		n, err := io.ReadAtLeast(ackR, ack, len(ack))
		if err == nil && string(ack[:n]) != "ack\n" {
			err = fmt.Errorf("perf answered %q to enable", ack[:n])
		}
		acked <- err
	}()
	wait := time.NewTimer(perfAttach)
	defer wait.Stop()
	select {
	case err = <-acked:
	case <-wait.C:
		err = fmt.Errorf("perf did not attach within %v", perfAttach)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		// Killed, its pipes close: the goroutine's read ends.
		cmd.Process.Kill()
		cmd.Wait()
		ctlW.Close()
		return nil, nil, err
	}
	return cmd, ctlW, nil
}

// startSyscallCounter attaches perf to pid; without perf (or without the
// right to trace) the counter's stop says so and the figure is absent.
func startSyscallCounter(ctx context.Context, pid int) *syscallCounter {
	c := &syscallCounter{}
	path, err := exec.LookPath("perf")
	if err != nil {
		c.err = err
		return c
	}
	c.cmd, c.ctl, c.err = startPerf(ctx, path, []string{"stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "-p", strconv.Itoa(pid)}, io.Discard, &c.out)
	return c
}

// stop ends perf (SIGINT makes it print its counts) and returns the
// count.
func (c *syscallCounter) stop() (float64, bool) {
	if c.cmd == nil {
		return 0, false
	}
	interrupt(c.cmd, 5*time.Second)
	c.ctl.Close()
	return parsePerfCount(c.out.String(), "raw_syscalls:sys_enter")
}

// interrupt stops a perf command the way it finishes its work (SIGINT: perf
// stat prints its counts, perf record writes its file) and waits for it,
// killing it after grace; it reports whether it ended by itself.
func interrupt(cmd *exec.Cmd, grace time.Duration) bool {
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
		return false
	}
}

// parsePerfCount reads an event's count from perf stat's -x, output
// ("12345,,raw_syscalls:sys_enter,..."); "<not counted>" and
// "<not supported>" are absent.
func parsePerfCount(out, event string) (float64, bool) {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, ",")
		if len(f) < 3 || f[2] != event {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	return 0, false
}

// Figures of the system call table.
var (
	metricSyscallsPerReq = func(s sample) (float64, bool) {
		return s.syscalls / s.requests, s.syscallsOK && s.requestsOK && s.requests > 0
	}
	metricRequests = func(s sample) (float64, bool) { return s.requests, s.requestsOK }
	// metricKernelShare is the share of the broker's CPU spent in the
	// kernel (stime over utime + stime).
	metricKernelShare = func(s sample) (float64, bool) {
		return s.cpuSys.Seconds() / s.cpu.Seconds(), s.cpuOK && s.cpu > 0
	}
	metricUserCPU = func(s sample) (float64, bool) { return (s.cpu - s.cpuSys).Seconds(), s.cpuOK }
	metricSysCPU  = func(s sample) (float64, bool) { return s.cpuSys.Seconds(), s.cpuOK }
)

// netPathTables are the tables issue 13's targets read, in the order the
// system call table lists them, with their names there.
func (s *suite) netPathTables() []struct {
	name string
	t    *table
} {
	return []struct {
		name string
		t    *table
	}{
		{"produce 1 KiB, 2 producers", s.findTable(partProduce, baseLike(kindProduce, 1024, false))},
		{"produce 100 B, 1 producer", s.findTable(partProduce, netPathsLike(kindProduce))},
		{"consume from the page cache, 1 KiB", s.findTable(partWarmKgo, baseLike(kindConsume, 1024, false))},
		{fmt.Sprintf("produce at %s records/s", fmtCount(fixedLatencyRate)),
			s.findTable(partProduce, fixedRateLike(kindLatency, 1024, false, fixedLatencyRate))},
		{fmt.Sprintf("end to end at %s records/s", fmtCount(fixedLatencyRate)), s.findTable(partConsume, netPathsLike(kindE2E))},
		{"produce 1 KiB, 100 producers", s.findTable(partProduce, connsLike(0))},
		{"the same beside 9,900 idle connections", s.findTable(partProduce, connsLike(connsTotal-connsProducers))},
	}
}

// netPathsLike finds issue 13's own workload of a kind.
func netPathsLike(kind workloadKind) func(w workload) bool {
	return func(w workload) bool { return w.netPaths && w.kind == kind && !connsWorkload(w) }
}

// netPathsTargets are issue 13's targets: ringlog io_uring net against
// ringlog portable and kfake in the same tables.
func (s *suite) netPathsTargets() []ratioTarget {
	tabs := s.netPathTables()
	base, small, warm, fixed, e2e := tabs[0].t, tabs[1].t, tabs[2].t, tabs[3].t, tabs[4].t
	var ks []ratioTarget
	add := func(k ratioTarget, t *table, m metric, theirs string) {
		k.target = "io_uring net: " + k.target
		if t != nil {
			spec, _ := peerSpecByKey(theirs)
			k.compare(m, t.rows[netUringPeer], t.rows[theirs], "ringlog io_uring net", spec.name)
		}
		ks = append(ks, k)
	}
	add(ratioTarget{target: "produce 1 KiB, 16 partitions, 2 producers records/s ≥ 1.2x portable's", atLeast: true, bound: 1.2,
		format: fmtCount, where: " records/s"}, base, metricRate, portablePeer)
	add(ratioTarget{target: netPathsCPUPerGB, bound: 0.6,
		format: fmtSeconds, where: " s/GB, 1 KiB produce"}, base, metricCPUPerGB, portablePeer)
	add(ratioTarget{target: "broker CPU per million records ≤ 0.6x portable's", bound: 0.6,
		format: fmtSeconds, where: " s/M, 100 B produce, 1 producer"}, small, metricCPUPerM, portablePeer)
	add(ratioTarget{target: "broker CPU per million records ≤ 0.35x kfake's", bound: 0.35,
		format: fmtSeconds, where: " s/M, 100 B produce, 1 producer"}, small, metricCPUPerM, "kfake")
	add(ratioTarget{target: "consume from the page cache broker CPU per GB ≤ 0.5x portable's", bound: 0.5,
		format: fmtSeconds, where: " s/GB, 1 KiB, kgo"}, warm, metricCPUPerGB, portablePeer)
	rate := fmtCount(fixedLatencyRate)
	add(ratioTarget{target: fmt.Sprintf("produce ack p99 at %s records/s ≤ 0.5x kfake's", rate), bound: 0.5,
		format: fmtMicros, where: ", open loop"}, fixed, metricLatency(99), "kfake")
	add(ratioTarget{target: fmt.Sprintf("produce ack p99 at %s records/s ≤ 1.0x portable's", rate), bound: 1,
		format: fmtMicros, where: ", open loop"}, fixed, metricLatency(99), portablePeer)
	add(ratioTarget{target: netPathsE2E, bound: 1,
		format: fmtMicros, where: ", open loop"}, e2e, metricLatency(99.9), portablePeer)
	return ks
}

// quickNetPathsReason is why -quick has no end-to-end figure at the
// fixed rate.
const quickNetPathsReason = "-quick leaves issue 13's end-to-end run at the fixed rate out (its time limit grows by " +
	"about 10 s for the issue's rows); the standard matrix has it"

// Two of issue 13's targets the writer finds by name: the absolute bound
// follows the first, -quick has no figures for the second.
var (
	netPathsCPUPerGB = "broker CPU per GB ≤ 0.6x portable's"
	netPathsE2E      = fmt.Sprintf("end-to-end p99.9 at %s records/s ≤ 1.0x portable's", fmtCount(fixedLatencyRate))
)

// netPathsAbsolute is issue 13's one bound that is not a ratio: ringlog
// io_uring net's broker CPU per GB produced at 1 KiB.
const netPathsAbsolute = 0.6

// netPathsConnsTarget is issue 13's target on idle connections.
const netPathsConnsTarget = "io_uring net: 10,000 connections, 100 of them producing: broker CPU per GB ≤ 1.2x its figure with 100 connections"

// writeNetPathsTargets prints issue 13's targets with judge and line of
// writeTargets.
func (s *suite) writeNetPathsTargets(judge func(target, measured, verdict string), line func(target, measured string, ok, known bool)) {
	ks := s.netPathsTargets()
	abs := "io_uring net: broker CPU per GB ≤ 0.6 s/GB (1 KiB produce)"
	for _, k := range ks {
		if !k.known && k.missing == "" && s.cfg.quick && k.target == "io_uring net: "+netPathsE2E {
			judge(k.target, "—", "not measured in this matrix: "+quickNetPathsReason)
			continue
		}
		k.judge(judge, line)
		if k.target == fmt.Sprintf("io_uring net: produce ack p99 at %s records/s ≤ 1.0x portable's", fmtCount(fixedLatencyRate)) {
			// The broker's own share of the same runs.
			s.writeBrokerP99Target(judge, line)
		}
		if k.target == "io_uring net: "+netPathsCPUPerGB {
			base := s.findTable(partProduce, baseLike(kindProduce, 1024, false))
			switch sp, ok := base.rowOf(netUringPeer).spread(metricCPUPerGB); {
			case ok:
				line(abs, fmtSeconds(sp.med)+" s/GB", sp.med <= netPathsAbsolute, true)
			case base == nil:
				line(abs, "—", false, false)
			default:
				st, _ := base.rowOf(netUringPeer).state()
				judge(abs, "—", "not measured: ringlog io_uring net "+st)
			}
		}
	}
	k := s.connsTarget()
	if !k.known && k.missing == "" && s.cfg.quick {
		judge(k.target, "—", "not measured in this matrix: "+quickConnsReason)
		return
	}
	k.judge(judge, line)
}

// quickConnsReason is why -quick has no 10,000-connection figure.
const quickConnsReason = "-quick leaves the 10,000-connection runs out (opening the idle connections and starting " +
	"100 producers take seconds per run); the standard matrix has them"

// connsTarget is issue 13's target on idle connections: ringlog io_uring
// net's broker CPU per GB with 100 producers beside 9,900 idle
// connections over its figure with the producers alone, the epoll and
// portable paths' same ratios stated beside.
func (s *suite) connsTarget() ratioTarget {
	k := ratioTarget{target: netPathsConnsTarget, bound: 1.2, format: fmtSeconds}
	alone, crowd := s.findTable(partProduce, connsLike(0)), s.findTable(partProduce, connsLike(connsTotal-connsProducers))
	if alone == nil || crowd == nil {
		return k
	}
	k.where = " s/GB, 1 KiB produce"
	k.compare(metricCPUPerGB, crowd.rows[netUringPeer], alone.rows[netUringPeer],
		"ringlog io_uring net with 10,000 connections", "ringlog io_uring net with 100")
	if !k.known {
		return k
	}
	var others []string
	for _, key := range []string{referencePeer, portablePeer} {
		a, ok1 := crowd.rowOf(key).spread(metricCPUPerGB)
		b, ok2 := alone.rowOf(key).spread(metricCPUPerGB)
		if ok1 && ok2 && b.med > 0 {
			spec, _ := peerSpecByKey(key)
			others = append(others, fmt.Sprintf("%s %s", spec.name, fmtRatio(a.med/b.med)))
		}
	}
	if len(others) > 0 {
		k.where += "; the same ratio for " + strings.Join(others, ", ")
	}
	return k
}

// rowOf is peer key's row of t, or nil.
func (t *table) rowOf(key string) *row {
	if t == nil {
		return nil
	}
	return t.rows[key]
}

// judge prints the target as writeTargets does.
func (k ratioTarget) judge(judge func(target, measured, verdict string), line func(target, measured string, ok, known bool)) {
	switch {
	case k.known:
		line(k.target, fmt.Sprintf("%s (%s against %s%s)", fmtRatio(k.ratio), k.format(k.ours), k.format(k.theirs), k.where),
			k.met(), true)
	case k.missing != "":
		judge(k.target, "—", k.missing)
	default:
		line(k.target, "—", false, false)
	}
}

// writeNetPaths prints, for each of ringlog's network paths, its system
// calls per request and the split of its CPU between user space and the
// kernel in the tables of issue 13's targets.
func (s *suite) writeNetPaths(w io.Writer) {
	fmt.Fprintf(w, "## Network paths: system calls and CPU split\n\n")
	fmt.Fprint(w, "ringlog's three network paths in the tables issue 13's targets read: ringlog io_uring (disk on io_uring, "+
		"network on gnet's epoll loops), ringlog io_uring net (disk and network on io_uring, the connections on the shards' rings; "+
		"ringlog io_uring net on loops, when selected, has them on io_uring loops of their own) and ringlog portable (pwrite "+
		"and the net package). System calls: `perf stat -e raw_syscalls:sys_enter -p <broker>` over the measured run "+
		"(every thread; perf attaches before the load starts). Requests: the broker's "+requestsMetric+" where it "+
		"exports it, else the requests the suite's kgo clients wrote to it (the same requests, seen from the other end). "+
		"CPU: utime and stime of /proc/<pid>/stat over the run (10 ms ticks).\n\n")
	fmt.Fprint(w, "| measurement | peer | requests | system calls / request | broker CPU user (s) | kernel (s) | kernel share |\n"+
		"|---|---|--:|--:|--:|--:|--:|\n")
	s.writeNetPathRows(w, []column{{"", metricRequests, fmtCount}, {"", metricSyscallsPerReq, fmtPerReq},
		{"", metricUserCPU, fmtSeconds}, {"", metricSysCPU, fmtSeconds}, {"", metricKernelShare, fmtPct}})
	fmt.Fprint(w, "\nA \"—\" for system calls means perf was not there or could not attach (scripts/bench.sh installs it). "+
		"Counting costs each system call of the broker a little, the same on every path.\n\n")
	s.writeKernelSplit(w)
}

// writeNetPathRows prints the rows of a network paths table: for each of
// issue 13's tables, each path's figures of cols, or why it has none.
func (s *suite) writeNetPathRows(w io.Writer, cols []column) {
	dashes := strings.Repeat(" — |", len(cols)-1)
	for _, nt := range s.netPathTables() {
		if nt.t == nil {
			fmt.Fprintf(w, "| %s | — | *not in this matrix* |%s\n", nt.name, dashes)
			continue
		}
		for _, key := range netPathSpecs {
			spec, _ := peerSpecByKey(key)
			r := nt.t.rows[key]
			if st, reason := r.state(); st != "" {
				fmt.Fprintf(w, "| %s | %s | *%s: %s* |%s\n", nt.name, spec.name, st, mdEscape(reason), dashes)
				continue
			}
			cells := []string{}
			for _, c := range cols {
				if sp, ok := r.spread(c.m); ok {
					cells = append(cells, cell(sp, c.f))
				} else {
					cells = append(cells, "—")
				}
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", nt.name, spec.name, strings.Join(cells, " | "))
		}
	}
}

// fmtPerReq prints system calls per request.
func fmtPerReq(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

package bench

import (
	"fmt"
	"strings"
)

// workloadKind is what a workload does.
type workloadKind string

const (
	// produce: producers send as fast as their clients take records (closed
	// loop); records/s and acknowledgement latency at saturation.
	kindProduce workloadKind = "produce"
	// consume: a topic is filled, then read from offset 0 with kgo and with
	// kcat while it is in the page cache, then with kgo after the peer's
	// files were dropped from the cache.
	kindConsume workloadKind = "consume"
	// latency: producers send at a fixed rate (open loop, send times planned
	// in advance); acknowledgement latency.
	kindLatency workloadKind = "latency"
	// e2e: the same open loop with consumers tailing the topic; latency from
	// a record's planned send time to its arrival at a consumer.
	kindE2E workloadKind = "e2e"
	// both: closed-loop producers and tailing consumers at once.
	kindBoth workloadKind = "produce+consume"
)

// workload is one cell of the matrix. Every peer runs it with the same
// records, bounds and client settings.
type workload struct {
	kind        workloadKind
	client      string // produce: kgo or kcat
	size        int    // value bytes
	partitions  int
	acks        int // 0, 1, -1 (all)
	compression string
	producers   int
	consumers   int
	fsync       bool // the peers run with their fsync-every-write setting
	// rate, when not 0, fixes an open-loop workload's rate in records/s,
	// whatever the peers' peaks; 0 is the suite's open-loop rate.
	rate float64
	// txn, when not 0, makes the producers transactional (kgo, acks=all),
	// committing every txn records (per producer): a produce workload
	// measures them against idempotent producers, a consume workload
	// fills its topic so and reads it read_uncommitted and read_committed.
	txn int
	// netPaths makes the workload one of issue 13's own (see
	// netpaths.go): it runs on the peers its targets compare only.
	netPaths bool
	// idle, when not 0, opens that many idle connections to the peer
	// before the run and keeps them open through it (see idle.go).
	idle int
	// main marks the run during which ringlog io_uring's CPU profile is
	// taken; base marks the one whose peak sets the open-loop rate.
	main, base bool
}

// fixedLatencyRate is the rate of the open-loop latency workload that
// does not follow the peers' peaks: the rate at which the produce p99
// target against Apache Kafka is stated (a load both keep up with, so
// that the ratio is of latencies, not of a backlog).
const fixedLatencyRate = 50_000

func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func acksName(a int) string {
	if a == -1 {
		return "all"
	}
	return fmt.Sprint(a)
}

// id names the workload in files and JSON.
func (w workload) id() string {
	s := fmt.Sprintf("%s-%s-p%d-acks%s-%s", strings.ReplaceAll(string(w.kind), "+", "-"),
		strings.ReplaceAll(sizeName(w.size), " ", ""), w.partitions, acksName(w.acks), w.compression)
	if w.kind == kindProduce {
		s += "-" + w.client
	}
	if w.fsync {
		s += "-fsync"
	}
	if w.rate > 0 {
		s += fmt.Sprintf("-%.0fps", w.rate)
	}
	if w.txn > 0 {
		s += fmt.Sprintf("-txn%d", w.txn)
	}
	if w.netPaths {
		s += fmt.Sprintf("-%dproducers", w.producers)
	}
	if w.idle > 0 {
		s += fmt.Sprintf("-%didle", w.idle)
	}
	return s
}

// describe states the workload in words, as every table's heading does.
func (w workload) describe() string {
	comp := "no compression"
	if w.compression != "none" {
		comp = w.compression
	}
	var who string
	switch w.kind {
	case kindProduce, kindLatency:
		who = fmt.Sprintf("%d producer%s", w.producers, map[bool]string{true: "", false: "s"}[w.producers == 1])
	case kindConsume:
		who = fmt.Sprintf("%d consumers", w.consumers)
	default:
		who = fmt.Sprintf("%d producers, %d consumers", w.producers, w.consumers)
	}
	dur := "flush never (page cache)"
	if w.fsync {
		dur = "fsync every write"
	}
	if w.idle > 0 {
		who += fmt.Sprintf(" beside %s idle connections", fmtThousands(w.idle))
	}
	if w.txn > 0 {
		who += fmt.Sprintf(", transactional (%d records per transaction per producer)", w.txn)
	}
	return fmt.Sprintf("%s values, %d partitions, acks=%s, %s, %s, %s", sizeName(w.size), w.partitions,
		acksName(w.acks), comp, who, dur)
}

// table is one table of the report: one measurement of a workload, a row
// per peer.
type table struct {
	id     string
	title  string
	w      workload
	part   string // which measurement of the workload (see tablesFor)
	client string // kgo, kcat or "kgo (NATS: nats.go)"
	kind   tableKind
	note   string
	rows   map[string]*row // by peer id
}

// tableKind chooses a table's columns.
type tableKind int

const (
	tableProduce tableKind = iota // throughput and ack latency
	tableConsume                  // throughput, CPU per GB, sendfile
	tableLatency                  // latency at a fixed rate
)

// Parts of a workload's measurements.
const (
	partProduce  = "produce"
	partWarmKgo  = "warm-kgo"
	partWarmKcat = "warm-kcat"
	partColdKgo  = "cold-kgo"
	partConsume  = "consume"
	// Of a transactional consume workload: the same records read
	// read_uncommitted (partWarmKgo) and read_committed.
	partWarmKgoRC = "warm-kgo-read-committed"
)

// tablesFor lists the tables a workload fills.
func tablesFor(w workload) []*table {
	mk := func(part, title, client string, k tableKind, note string) *table {
		id := w.id()
		if w.kind == kindConsume || w.kind == kindBoth {
			id += "/" + part
		}
		return &table{id: id, title: title, w: w, part: part, client: client, kind: k, note: note, rows: map[string]*row{}}
	}
	kgoNats := "kgo (NATS: nats.go)"
	switch w.kind {
	case kindProduce:
		title := "Produce, closed loop"
		if w.fsync {
			title = "Produce with fsync, closed loop"
		}
		if w.client == "kcat" {
			return []*table{mk(partProduce, title, "kcat", tableProduce,
				"One kcat process per producer, each sending its share of a fixed number of records (as many as kgo "+
					"produced in one run's time on the same peer), from the start of the processes to their exit. "+
					"kcat does not report latency.")}
		}
		if w.txn > 0 {
			return []*table{mk(partProduce, "Produce, transactional, closed loop", "kgo", tableProduce,
				fmt.Sprintf("Each producer begins a transaction, sends %d records, flushes and commits, and again. Records count "+
					"once their transaction committed; latency is from handing a record to the client to its acknowledgement "+
					"(before the commit). Compare with the idempotent acks=all table.", w.txn))}
		}
		note := "Latency: from handing a record to the client to its acknowledgement, at saturation (it includes the client's queue)."
		if connsWorkload(w) {
			note += fmt.Sprintf(" Each producer buffers %d MiB (not 32: a hundred of them share the suite's process); kgo gives each "+
				"a second connection for its metadata requests, idle during the run.", connsBuffered>>20)
			if w.idle > 0 {
				note += fmt.Sprintf(" The %s idle connections each sent one ApiVersions request, read its answer and stay open "+
					"through the run, opened before it and closed after (not measured); a run in which the broker closed "+
					"any of them fails.", fmtThousands(w.idle))
			}
		}
		return []*table{mk(partProduce, title, kgoNats, tableProduce, note)}
	case kindConsume:
		if w.txn > 0 {
			fill := fmt.Sprintf("The topic is filled by transactional producers committing every %d records; ", w.txn)
			return []*table{
				mk(partWarmKgo, "Consume transactional records from the page cache, read_uncommitted", "kgo", tableConsume,
					fill+"read with isolation level read_uncommitted."),
				mk(partWarmKgoRC, "Consume transactional records from the page cache, read_committed", "kgo", tableConsume,
					fill+"the same records read with isolation level read_committed (up to the last stable offset, "+
						"aborted transactions filtered)."),
			}
		}
		return []*table{
			mk(partWarmKgo, "Consume from the page cache", kgoNats, tableConsume, ""),
			mk(partWarmKcat, "Consume from the page cache", "kcat", tableConsume,
				"One kcat process reads every partition (kcat -C takes one partition or all of them), from its start to its exit."),
			mk(partColdKgo, "Consume after dropping the cache", kgoNats, tableConsume,
				"Cache dropped with: "+cacheDropMethod+"."),
		}
	case kindLatency:
		return []*table{mk(partProduce, "Produce latency, open loop", kgoNats, tableLatency,
			"Latency: from a record's planned send time to its acknowledgement.")}
	case kindE2E:
		return []*table{mk(partConsume, "End-to-end latency, open loop", kgoNats, tableLatency,
			"Latency: from a record's planned send time to its arrival at a consumer.")}
	case kindBoth:
		return []*table{
			mk(partProduce, "Produce and consume together: producers", kgoNats, tableProduce,
				"Broker CPU and RSS cover both directions."),
			mk(partConsume, "Produce and consume together: consumers", kgoNats, tableLatency,
				"Latency: from a record's send time to its arrival at a consumer. Broker CPU and RSS cover both directions."),
		}
	}
	return nil
}

// matrix builds the workload list. quick is the smoke set, standard varies
// one axis at a time around a base workload (1 KiB, 16 partitions, acks=1,
// no compression), produce is the single-node produce comparison of issue 3
// (100 B and 1 KiB values on 1 and 16 partitions, nothing else), full is
// every produce combination plus the rest, net is issue 13's workloads.
func matrix(name string, producers, consumers int) []workload {
	base := workload{kind: kindProduce, client: "kgo", size: 1024, partitions: 16, acks: 1,
		compression: "none", producers: producers, consumers: consumers}
	with := func(f func(w *workload)) workload {
		w := base
		w.main, w.base = false, false
		f(&w)
		return w
	}
	main := base
	main.main, main.base = true, true
	kcat := with(func(w *workload) { w.client = "kcat" })
	fsync := with(func(w *workload) { w.fsync = true })
	consume := with(func(w *workload) { w.kind = kindConsume })
	lat := with(func(w *workload) { w.kind = kindLatency })
	latFixed := with(func(w *workload) { w.kind, w.rate = kindLatency, fixedLatencyRate })
	e2e := with(func(w *workload) { w.kind = kindE2E })
	both := with(func(w *workload) { w.kind = kindBoth })
	idem := with(func(w *workload) { w.acks = -1 })
	txn := func(n int) workload { return with(func(w *workload) { w.acks, w.txn = -1, n }) }
	txnConsume := with(func(w *workload) { w.kind, w.acks, w.txn = kindConsume, -1, 1000 })
	// Issue 13's own: 100 B records from one producer (broker CPU per
	// record, with the fewest records per request), and end-to-end latency
	// at the fixed 50k records/s.
	small1 := with(func(w *workload) { w.size, w.producers, w.netPaths = 100, 1, true })
	e2eFixed := with(func(w *workload) { w.kind, w.rate, w.netPaths = kindE2E, fixedLatencyRate, true })
	// And its 10,000 connections: 100 producers alone, then beside
	// idle connections up to 10,000 (standard and full matrices only:
	// opening them and starting 100 clients takes seconds).
	conns100 := with(func(w *workload) { w.producers, w.netPaths = connsProducers, true })
	conns10k := with(func(w *workload) { w.producers, w.idle, w.netPaths = connsProducers, connsTotal-connsProducers, true })
	// The base produce workload comes first: its peak sets the open-loop
	// rate of the latency workloads.
	switch name {
	case "quick":
		// Of issue 13's own workloads -quick runs the 100 B one: its
		// time limit grows by about 10 s for the issue, the new peer's
		// runs of the base workloads and this one (see quickNetPathsReason).
		return []workload{main, kcat, fsync, consume, lat, latFixed, e2e, both, idem, txn(1000), txnConsume, small1}
	case "net":
		// Issue 13's targets alone: the base produce run (and its rate
		// for the open loop), consume from the page cache, the fixed-rate
		// open loop, and the issue's own workloads; run with the peers
		// they compare (-peers), about a quarter of the standard run.
		return []workload{main, consume, latFixed, small1, e2eFixed, conns100, conns10k}
	case "produce":
		return []workload{main,
			with(func(w *workload) { w.size = 100 }),
			with(func(w *workload) { w.partitions = 1 }),
			with(func(w *workload) { w.size, w.partitions = 100, 1 }),
		}
	case "full":
		ws := []workload{main}
		for _, size := range []int{100, 1024, 16384} {
			for _, parts := range []int{1, 16, 64} {
				for _, acks := range []int{0, 1, -1} {
					for _, comp := range []string{"none", "zstd"} {
						w := with(func(w *workload) { w.size, w.partitions, w.acks, w.compression = size, parts, acks, comp })
						if w.id() != main.id() {
							ws = append(ws, w)
						}
					}
				}
			}
		}
		for _, size := range []int{100, 1024, 16384} {
			ws = append(ws, with(func(w *workload) { w.client, w.size = "kcat", size }))
			ws = append(ws, with(func(w *workload) { w.kind, w.size = kindConsume, size }))
		}
		return append(ws, fsync, with(func(w *workload) { w.fsync, w.size = true, 100 }), lat, latFixed, e2e, both,
			txn(100), txn(1000), txnConsume, small1, e2eFixed, conns100, conns10k)
	}
	return []workload{
		main, kcat,
		with(func(w *workload) { w.size = 100 }),
		with(func(w *workload) { w.size, w.client = 100, "kcat" }),
		with(func(w *workload) { w.size = 16384 }),
		with(func(w *workload) { w.partitions = 1 }),
		with(func(w *workload) { w.partitions = 64 }),
		with(func(w *workload) { w.acks = 0 }),
		idem, txn(100), txn(1000),
		with(func(w *workload) { w.compression = "zstd" }),
		fsync,
		consume, txnConsume,
		lat, latFixed, e2e, both,
		small1, e2eFixed, conns100, conns10k,
	}
}

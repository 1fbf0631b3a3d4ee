// Command ringlog is the broker: a single node speaking the Kafka protocol
// on 127.0.0.1:9092 with its data under ./data unless told otherwise.
//
//	ringlog [-listen ADDR] [-advertise ADDR] [-data-dir DIR] [-shards N]
//	        [-io auto|uring|portable] [-flush always|interval|never]
//	        [-admin ADDR] [-config server.properties] [-node-id N]
//
// Flags override the -config file, which uses Kafka's own names.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"ringlog/bench"
	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/ioring"
	"ringlog/kafka"
	"ringlog/netpoll"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ringlog:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "bench" {
		return bench.Main(args[1:])
	}
	s := defaultSettings()
	fs := flag.NewFlagSet("ringlog", flag.ContinueOnError)
	listen := fs.String("listen", s.listen, "address to listen on for Kafka clients")
	advertise := fs.String("advertise", "", "host:port clients are told to connect to (default: the listen address)")
	dataDir := fs.String("data-dir", s.dataDir, "directory holding the partition logs")
	shards := fs.Int("shards", 0, "shards (goroutines owning partitions); 0 = GOMAXPROCS")
	ioMode := fs.String("io", string(s.io), "I/O path: auto (probe io_uring), uring (fail without it) or portable")
	flush := fs.String("flush", "never", "default flush policy: always (fsync each append round), interval, never (Kafka's default)")
	admin := fs.String("admin", "", "address for the admin HTTP listener (/metrics, /debug/pprof); off when empty")
	config := fs.String("config", "", "a Kafka server.properties file; flags override it")
	nodeID := fs.Int("node-id", 0, "this broker's node id")
	voters := fs.String("controller-voters", "", "the metadata quorum, id@host:port of each voter's controller listener (this node's included); empty: a broker on its own, the only voter of a local quorum (no listener)")
	rack := fs.String("rack", "", "broker.rack, for rack-aware replica placement and follower fetching")
	clusterID := fs.String("cluster-id", "", "cluster.id, Kafka's Uuid in base64 (22 characters), recorded in the data directory at first start and checked at every start; "+
		"empty: with -controller-voters derived from the voter list (the same on brokers given the same list), else random")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *config != "" {
		if err := s.loadPropertiesFile(*config); err != nil {
			return err
		}
	}
	// Flags given on the command line win over the file.
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "listen":
			s.listen = *listen
		case "advertise":
			s.advertise = *advertise
		case "data-dir":
			s.dataDir = *dataDir
		case "shards":
			s.shards = *shards
		case "io":
			s.io, err = ioring.ParseMode(*ioMode)
		case "flush":
			err = s.applyFlush(*flush)
		case "admin":
			s.admin = *admin
		case "node-id":
			s.nodeID = int32(*nodeID)
		case "controller-voters":
			s.cluster.voters = *voters
		case "rack":
			s.rack = *rack
		case "cluster-id":
			s.clusterID = *clusterID
		}
	})
	if err != nil {
		return err
	}
	if s.advertise == "" {
		s.advertise = s.listen
	}
	return serve(s)
}

func serve(s settings) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(logger)
	advHost, advPortStr, err := net.SplitHostPort(s.advertise)
	if err != nil {
		return fmt.Errorf("advertised address %q: %w", s.advertise, err)
	}
	advPort, err := strconv.Atoi(advPortStr)
	if err != nil {
		return fmt.Errorf("advertised port %q: %w", advPortStr, err)
	}

	engCfg := engine.Config{
		Dir: s.dataDir, Shards: s.shards, IO: s.io, Topic: s.topic, NumPartitions: s.numPartitions,
		RetentionCheckInterval: s.retentionTick, ProducerIDExpiration: s.producerExp, Cleaner: s.cleaner,
		NodeID: s.nodeID, Logger: logger,
	}
	engCfg.ClusterID = s.clusterID
	cl, err := newCluster(s, logger)
	if err != nil {
		return err
	}
	engCfg.Replicated, engCfg.OnAppended = true, cl.node.OnAppended
	// One cluster id on every broker, producer ids from the quorum.
	if engCfg.ClusterID, err = cl.clusterID(); err != nil {
		return err
	}
	engCfg.ProducerIDBlock = cl.producerIDBlock
	eng, err := engine.Open(engCfg)
	if err != nil {
		return err
	}
	// Signals are caught from here on, so that a broker waiting for its
	// quorum stops cleanly too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if err := cl.start(eng); err != nil {
		eng.Close()
		return err
	}
	if !cl.waitReady(sig) {
		return errors.Join(cl.close(), eng.Close())
	}
	gcfg := s.groups
	gcfg.Logger = logger
	// __consumer_offsets is the cluster's: created through the controller
	// when first needed, its partitions coordinated by their leaders.
	gcfg.Replicated = true
	gcfg.OffsetsTopicPartitions = cl.offsetsPartitions(gcfg.OffsetsTopicPartitions)
	groups, err := group.Start(eng, gcfg)
	if err != nil {
		cl.close()
		eng.Close()
		return err
	}
	cl.hostGroups(groups)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := kafka.NewMetrics(reg)
	kcfg := kafka.Config{
		NodeID: s.nodeID, AdvertisedHost: advHost, AdvertisedPort: int32(advPort), Rack: s.rack,
		AutoCreateTopics: s.autoCreate, Logger: logger, Metrics: metrics, Groups: groups, Node: cl.node,
	}
	srv := kafka.NewServer(kcfg, eng)
	ioPortable := eng.IOChoice().Kind == ioring.Portable
	ns, err := netpoll.Listen(netpoll.Config{
		Addr: s.listen, Portable: s.io == ioring.ModePortable, Loops: s.loops,
		MaxFrameBytes: s.maxFrameBytes, Logger: logger,
	}, srv)
	if err != nil {
		groups.Close()
		cl.close()
		eng.Close()
		return err
	}
	registerNetMetrics(reg, ns)
	registerEngineMetrics(reg, eng)
	logger.Info("ringlog started", "listen", ns.Addr().String(), "advertise", s.advertise, "data_dir", s.dataDir,
		"node_id", s.nodeID, "cluster_id", eng.ClusterID(), "io", eng.IOChoice().Kind, "io_reason", eng.IOChoice().Reason,
		"network", map[bool]string{true: "portable", false: "gnet"}[s.io == ioring.ModePortable], "flush", s.topic.Log.Flush,
		"portable_disk", ioPortable)

	var adminSrv *http.Server
	if s.admin != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		ln, err := net.Listen("tcp", s.admin)
		if err != nil {
			ns.Close(context.Background())
			groups.Close()
			cl.close()
			eng.Close()
			return fmt.Errorf("admin listener: %w", err)
		}
		adminSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go adminSrv.Serve(ln)
		logger.Info("admin HTTP", "addr", ln.Addr().String())
	}

	got := <-sig
	logger.Info("shutting down", "signal", got.String())
	// Leaderships first, while clients can still be told where they went
	// (NOT_LEADER_OR_FOLLOWER, then Metadata naming the new leaders).
	cl.handOver()
	// Drain: stop accepting, answer what is in flight, then close the logs
	// cleanly (flushed, clean-shutdown markers written).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if adminSrv != nil {
		errs = append(errs, adminSrv.Shutdown(ctx))
	}
	// Parked long-poll fetches are answered now rather than after their
	// max_wait_ms, so that the network layer can drain at once.
	srv.StopLongPolls()
	// The coordinator answers its parked joins and syncs before the
	// network drains, so that nothing waits for a session timeout.
	groups.Close()
	errs = append(errs, ns.Close(ctx))
	// Replication stops before the logs close; the controller last, so
	// that a leading controller hands its leadership over.
	errs = append(errs, cl.close())
	errs = append(errs, eng.Close())
	if err := errors.Join(errs...); err != nil {
		logger.Error("shutdown", "err", err)
		return err
	}
	logger.Info("stopped cleanly")
	return nil
}

// registerNetMetrics exposes the network layer's counters.
func registerNetMetrics(reg prometheus.Registerer, ns *netpoll.Server) {
	counter := func(name, help string, get func(netpoll.Stats) int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ringlog", Name: name, Help: help},
			func() float64 { return float64(get(ns.Stats())) }))
	}
	counter("network_bytes_in_total", "Bytes received from clients.", func(s netpoll.Stats) int64 { return s.BytesIn })
	counter("network_bytes_out_total", "Bytes sent to clients.", func(s netpoll.Stats) int64 { return s.BytesOut })
	counter("fetch_sendfile_bytes_total", "Record bytes sent to clients with sendfile (zero-copy).", func(s netpoll.Stats) int64 { return s.SendfileBytes })
	counter("fetch_copied_bytes_total", "Record bytes that had to be copied instead of sent with sendfile.", func(s netpoll.Stats) int64 { return s.CopiedBytes })
	counter("connections_accepted_total", "Connections accepted.", func(s netpoll.Stats) int64 { return s.Accepted })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ringlog", Name: "connections", Help: "Open connections."},
		func() float64 { return float64(ns.Stats().Conns) }))
}

// engineCollector reports each partition's offsets.
type engineCollector struct {
	eng     *engine.Engine
	leo, hw *prometheus.Desc
	start   *prometheus.Desc
}

func registerEngineMetrics(reg prometheus.Registerer, eng *engine.Engine) {
	labels := []string{"topic", "partition"}
	reg.MustRegister(&engineCollector{eng: eng,
		leo:   prometheus.NewDesc("ringlog_log_end_offset", "Log end offset of each partition.", labels, nil),
		hw:    prometheus.NewDesc("ringlog_high_watermark", "High watermark of each partition.", labels, nil),
		start: prometheus.NewDesc("ringlog_log_start_offset", "Log start offset of each partition.", labels, nil),
	})
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.leo
	ch <- c.hw
	ch <- c.start
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, tp := range c.eng.Partitions() {
		st, err := c.eng.State(tp)
		if err != nil {
			continue
		}
		p := strconv.Itoa(int(tp.Partition))
		ch <- prometheus.MustNewConstMetric(c.leo, prometheus.GaugeValue, float64(st.LEO), tp.Topic, p)
		ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(st.HW), tp.Topic, p)
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(st.LogStartOffset), tp.Topic, p)
	}
}

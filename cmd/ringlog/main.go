// Command ringlog is the broker: a single node speaking the Kafka protocol
// on 127.0.0.1:9092 with its data under ./data unless told otherwise.
//
//	ringlog [-listen ADDR] [-advertise ADDR] [-data-dir DIR] [-shards N]
//	        [-io auto|uring|portable] [-net gnet|uring|uring-shards|uring-loops|portable] [-flush always|interval|never]
//	        [-admin ADDR] [-config server.properties] [-node-id N]
//	ringlog admin GROUP VERB [flags]    (topics, groups, cluster, partitions: docs/admin.md)
//	ringlog bench [flags]               (the benchmark suite)
//	ringlog bench metadata [flags]      (the controller's image at scale)
//	ringlog mirror [flags]              (MirrorMaker 2's flows between clusters: docs/mirror.md)
//	ringlog tune [-apply] [flags]       (host settings: limits, sysctls, disks: docs/tuning.md)
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
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"ringlog/bench"
	"ringlog/broker"
	"ringlog/engine"
	"ringlog/internal/admincli"
	"ringlog/ioring"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ringlog:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 1 && args[0] == "bench" && args[1] == "metadata" {
		err := benchMetadata(args[2:], os.Stdout, os.Stderr)
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if len(args) > 0 && args[0] == "bench" {
		return bench.Main(args[1:])
	}
	if len(args) > 0 && args[0] == "admin" {
		return admincli.Main(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "mirror" {
		return mirrorMain(args[1:])
	}
	if len(args) > 0 && args[0] == "tune" {
		return tuneMain(args[1:], os.Stdout, os.Stderr)
	}
	s := defaultSettings()
	fs := flag.NewFlagSet("ringlog", flag.ContinueOnError)
	listen := fs.String("listen", s.Listen, "address to listen on for Kafka clients")
	advertise := fs.String("advertise", "", "host:port clients are told to connect to (default: the listen address)")
	dataDir := fs.String("data-dir", s.DataDir, "directories holding the partition logs, comma-separated (log.dirs); the first also holds the broker's metadata")
	shards := fs.Int("shards", 0, "shards (goroutines owning partitions); 0 = GOMAXPROCS")
	ioMode := fs.String("io", string(s.IO), "I/O path: auto (probe io_uring), uring (fail without it) or portable")
	network := fs.String("net", "", "network path: gnet (epoll loops), uring (connections on the shards' io_uring rings, or on io_uring loops of their own where the shards own no rings; gnet if the kernel lacks what they need), uring-shards (uring, warning when the shards own no rings), uring-loops (io_uring loops of their own) or portable; empty: portable with -io=portable, else uring")
	writes := fs.String("writes", "auto", "how appends reach the disk: auto (direct when the disk path is io_uring, else buffered), buffered (through the page cache, as Kafka) or direct (O_DIRECT from a staging buffer, blocks reserved ahead; buffered where a log directory's file system has no direct I/O)")
	flush := fs.String("flush", "never", "default flush policy: always (fsync each append round), interval, never (Kafka's default)")
	admin := fs.String("admin", "", "address for the admin HTTP listener (/metrics, /debug/pprof); off when empty; loopback only unless -admin-public")
	adminPublic := fs.Bool("admin-public", false, "let -admin listen on an address other than loopback: pprof and metrics are unauthenticated")
	config := fs.String("config", "", "a Kafka server.properties file; flags override it")
	nodeID := fs.Int("node-id", 0, "this broker's node id")
	voters := fs.String("controller-voters", "", "the metadata quorum, id@host:port of each voter's controller listener (this node's included); empty: a broker on its own, the only voter of a local quorum (no listener)")
	roles := fs.String("process-roles", "broker,controller", "process.roles: broker (data only, an observer of the metadata quorum), controller (a voter of the quorum only: no Kafka listener, no logs) or broker,controller")
	bootstrap := fs.String("controller-bootstrap-servers", "", "controller.quorum.bootstrap.servers: host:port of controllers to find the quorum by, for a node not in -controller-voters")
	controllerListen := fs.String("controller-listen", "", "host:port of this node's controller listener when it is not in -controller-voters (a controller to be added as a voter; a broker-only node defaults to a free port)")
	rack := fs.String("rack", "", "broker.rack, for rack-aware replica placement and follower fetching")
	clusterID := fs.String("cluster-id", "", "cluster.id, Kafka's Uuid in base64 (22 characters), recorded in the data directory at first start and checked at every start; "+
		"empty: with -controller-voters derived from the voter list (the same on brokers given the same list), else random")
	var scram scramFlags
	fs.Var(&scram, "add-scram", "a SCRAM credential written into the metadata quorum at the first start, where it is missing (Kafka's kafka-storage format --add-scram): "+
		"SCRAM-SHA-512=[name=alice,password=alice-secret], optionally iterations=8192; repeat the flag for more")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *config != "" {
		// The roles decide which listeners the file must have (a
		// controller-only node has no broker listener): a -process-roles
		// flag is known before the file's listeners are built.
		var rerr error
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "process-roles" {
				s.Roles, rerr = broker.ParseRoles(*roles)
			}
		})
		if rerr != nil {
			return rerr
		}
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
			s.Listen = *listen
		case "advertise":
			s.Advertise = *advertise
		case "data-dir":
			err = s.setLogDirs(*dataDir)
		case "shards":
			s.Shards = *shards
		case "io":
			s.IO, err = ioring.ParseMode(*ioMode)
		case "net":
			s.Network = *network
		case "flush":
			err = s.applyFlush(*flush)
		case "writes":
			s.Writes, err = engine.ParseWrites(*writes)
		case "admin":
			s.admin = *admin
		case "node-id":
			s.NodeID = int32(*nodeID)
		case "controller-voters":
			s.Cluster.Voters = *voters
		case "process-roles":
			s.Roles, err = broker.ParseRoles(*roles)
		case "controller-bootstrap-servers":
			s.Cluster.BootstrapServers = *bootstrap
		case "controller-listen":
			s.Cluster.ControllerListen = *controllerListen
		case "rack":
			s.Rack = *rack
		case "cluster-id":
			s.ClusterID = *clusterID
		}
	})
	if err != nil {
		return err
	}
	s.BootstrapScram = scram
	if err := checkAdminAddr(s.admin, *adminPublic); err != nil {
		return err
	}
	return serve(s)
}

// checkAdminAddr refuses an admin listener off loopback unless public
// says the operator means it: pprof and metrics have no authentication.
func checkAdminAddr(addr string, public bool) error {
	if addr == "" || public {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-admin %s: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-admin %s is not a loopback address: pprof and metrics have no authentication; add -admin-public to serve them there anyway", addr)
}

func serve(s settings) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(logger)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := s.Config
	cfg.Logger, cfg.Metrics = logger, reg

	// Signals are caught from here on, so that a broker waiting for its
	// quorum stops cleanly too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer reloadOnHangup(logger)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	starting := make(chan struct{})
	go func() {
		select {
		case got := <-sig:
			logger.Info("signal while starting", "signal", got.String())
			cancel()
		case <-starting:
		}
	}()
	b, err := broker.Start(ctx, cfg)
	close(starting)
	if err != nil {
		if ctx.Err() != nil {
			// Asked to stop before the broker was up: not a failure.
			logger.Info("stopped before start completed", "err", err)
			return nil
		}
		return err
	}
	logStartLimits(logger, cfg)

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
			return errors.Join(fmt.Errorf("admin listener: %w", err), b.Close(context.Background()))
		}
		adminSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go adminSrv.Serve(ln)
		logger.Info("admin HTTP", "addr", ln.Addr().String())
	}

	var failed error
	select {
	case got := <-sig:
		logger.Info("shutting down", "signal", got.String())
	case failed = <-b.Failed():
		// A listener stopped serving on its own: the process exits rather
		// than keep heartbeating and leading partitions nobody can reach,
		// so that the controller fences it and moves its leaderships.
		logger.Error("shutting down: a listener stopped serving", "err", failed)
	}
	stopCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	errs := []error{failed}
	if adminSrv != nil {
		errs = append(errs, adminSrv.Shutdown(stopCtx))
	}
	errs = append(errs, b.Close(stopCtx))
	if err := errors.Join(errs...); err != nil {
		logger.Error("shutdown", "err", err)
		return err
	}
	logger.Info("stopped cleanly")
	return nil
}

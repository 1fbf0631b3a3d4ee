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
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"ringlog/internal/admincli"
	"ringlog/mirror"
)

// mirrorMain is `ringlog mirror`: MirrorMaker 2's flows between
// Kafka-compatible clusters (docs/mirror.md).
//
//	ringlog mirror -config mm2.properties
//	ringlog mirror -source HOST:PORT -target HOST:PORT [-topics REGEX] [-alias A] [-target-alias B]
func mirrorMain(args []string) error {
	fs := flag.NewFlagSet("ringlog mirror", flag.ContinueOnError)
	config := fs.String("config", "", "an MM2-style properties file: clusters = A, B; A.bootstrap.servers = ...; A->B.enabled = true; A->B.topics = REGEX; ...")
	source := fs.String("source", "", "the source cluster's bootstrap servers, comma-separated (instead of -config)")
	target := fs.String("target", "", "the target cluster's bootstrap servers, comma-separated (instead of -config)")
	topics := fs.String("topics", ".*", "with -source: the topics to mirror, MM2's comma-separated regexes")
	alias := fs.String("alias", "source", "with -source: the source cluster's alias; remote topics are named ALIAS.TOPIC")
	targetAlias := fs.String("target-alias", "target", "with -source: the target cluster's alias")
	policy := fs.String("replication-policy", "", "with -source: replication.policy.class, DefaultReplicationPolicy (ALIAS.TOPIC) or IdentityReplicationPolicy")
	refresh := fs.Duration("refresh", 0, "with -source: how often the source's topics and partitions are listed again (refresh.topics.interval.seconds; default MM2's 10m)")
	tasks := fs.Int("tasks", 1, "with -source: tasks.max; above 1 the flow's partitions are split into that many tasks, shared by every process running the flow through a consumer group on the source")
	sourceConfig := fs.String("source-config", "", "with -source: the source's Kafka client properties (security.protocol, ssl.*, sasl.*), as --command-config takes them")
	targetConfig := fs.String("target-config", "", "with -source: the target's Kafka client properties (security.protocol, ssl.*, sasl.*)")
	atLeastOnce := fs.Bool("at-least-once", false, "no transactions on the target: an idempotent producer, the source offsets written after the records (for targets without transactions; a crash mirrors records again)")
	admin := fs.String("admin", "", "address for the admin HTTP listener (/metrics, /debug/pprof); off when empty; loopback only unless -admin-public")
	adminPublic := fs.Bool("admin-public", false, "let -admin listen on an address other than loopback")
	progress := fs.Duration("progress", 10*time.Second, "period of the progress line in the log; 0: none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mirror: unexpected arguments %q", fs.Args())
	}
	var (
		flows []*mirror.Flow
		err   error
	)
	switch {
	case *config != "" && (*source != "" || *target != ""):
		return errors.New("mirror: -config or -source and -target, not both")
	case *config != "" && (*sourceConfig != "" || *targetConfig != ""):
		return errors.New("mirror: -source-config and -target-config go with -source and -target; in -config, set ALIAS.security.protocol, ALIAS.sasl.* and ALIAS.ssl.*")
	case *config != "":
		f, err := os.Open(*config)
		if err != nil {
			return err
		}
		flows, err = mirror.Load(f)
		f.Close()
		if err != nil {
			return err
		}
	case *source != "" && *target != "":
		name := *alias + "->" + *targetAlias
		p := map[string]string{
			"clusters":                          *alias + "," + *targetAlias,
			*alias + ".bootstrap.servers":       *source,
			*targetAlias + ".bootstrap.servers": *target,
			name + ".enabled":                   "true",
			name + ".topics":                    *topics,
			"replication.policy.class":          *policy,
			"tasks.max":                         fmt.Sprint(*tasks),
		}
		for _, c := range []struct{ path, alias string }{{*sourceConfig, *alias}, {*targetConfig, *targetAlias}} {
			if c.path == "" {
				continue
			}
			m, err := admincli.ReadProperties(c.path)
			if err != nil {
				return fmt.Errorf("mirror: %s: %w", c.path, err)
			}
			// Refuse by name what the client reader does not know,
			// rather than drop it.
			if _, err := admincli.SecurityOptions(m); err != nil {
				return fmt.Errorf("mirror: %s: %w", c.path, err)
			}
			for k, v := range m {
				p[c.alias+"."+k] = v
			}
		}
		if *refresh > 0 {
			p["refresh.topics.interval.seconds"] = fmt.Sprint(refresh.Seconds())
		}
		if flows, err = mirror.LoadProperties(p); err != nil {
			return err
		}
	default:
		return errors.New("mirror: give -config, or -source and -target")
	}
	if *atLeastOnce {
		for _, f := range flows {
			f.ExactlyOnce = false
		}
	}
	if err := checkAdminAddr(*admin, *adminPublic); err != nil {
		return err
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opt := mirror.Options{Logger: logger, Metrics: mirror.NewMetrics(reg), Progress: *progress}
	if *admin != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		// The broker's profiles, for the same reason: a mirror's CPU is
		// found where it goes under load (-admin is loopback only unless
		// -admin-public, as the broker's).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		ln, err := net.Listen("tcp", *admin)
		if err != nil {
			return fmt.Errorf("admin listener: %w", err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		logger.Info("admin HTTP", "addr", ln.Addr().String())
	}
	names := make([]string, len(flows))
	for i, f := range flows {
		names[i] = f.Name()
	}
	logger.Info("mirror: starting", "flows", strings.Join(names, ","))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	mirror.Run(ctx, flows, opt)
	logger.Info("mirror: stopped")
	return nil
}

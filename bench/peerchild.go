package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kfake"
)

// peerReadyLine starts the line a peer child prints once it accepts
// connections.
const peerReadyLine = "bench peer ready"

// peerMain is `ringlog bench peer kfake|nats`: one peer broker in a process
// of its own, started by the suite. It stops on SIGTERM or SIGINT, or when
// its standard input closes (the suite stopped it, or died).
func peerMain(args []string) error {
	if len(args) == 0 {
		return errors.New("bench peer: want kfake or nats")
	}
	fs := flag.NewFlagSet("ringlog bench peer", flag.ContinueOnError)
	port := fs.Int("port", 0, "loopback port to listen on")
	dir := fs.String("dir", "", "NATS: JetStream store directory")
	sync := fs.String("sync", "default", "NATS: default (sync_interval 2m) or always")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop <- syscall.SIGTERM
	}()
	switch args[0] {
	case "kfake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(*port))
		if err != nil {
			return fmt.Errorf("bench peer kfake: %w", err)
		}
		fmt.Printf("%s %s\n", peerReadyLine, c.ListenAddrs()[0])
		<-stop
		c.Close()
		return nil
	case "nats":
		if *dir == "" {
			return errors.New("bench peer nats: -dir is required")
		}
		opts := &natsserver.Options{
			Host: "127.0.0.1", Port: *port, JetStream: true, StoreDir: *dir,
			NoSigs: true, NoLog: true, MaxPayload: 8 << 20,
			// NATS's own default; stated here so that the report's claim
			// about it stays true if the default moves.
			SyncInterval: 2 * time.Minute,
		}
		if *sync == "always" {
			opts.SyncAlways = true
		}
		s, err := natsserver.NewServer(opts)
		if err != nil {
			return fmt.Errorf("bench peer nats: %w", err)
		}
		go s.Start()
		if !s.ReadyForConnections(20 * time.Second) {
			s.Shutdown()
			return errors.New("bench peer nats: not ready after 20s")
		}
		fmt.Printf("%s %s\n", peerReadyLine, s.ClientURL())
		<-stop
		s.Shutdown()
		s.WaitForShutdown()
		return nil
	}
	return fmt.Errorf("bench peer: unknown peer %q", args[0])
}

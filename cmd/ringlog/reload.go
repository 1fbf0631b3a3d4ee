package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"ringlog/broker"
)

// reloadOnHangup makes SIGHUP read the TLS keystore and truststore files
// again at once (broker.ReloadTLS): the systemd unit's ExecReload, so
// that systemctl reload ringlog takes a rotated certificate whatever its
// file's modification time. Nothing else is reloaded. Without a handler,
// Go's default for SIGHUP ends the process. It returns the function that
// stops listening.
func reloadOnHangup(logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				n, err := broker.ReloadTLS()
				if err != nil {
					logger.Error("SIGHUP: reloading TLS files failed; the last good ones keep serving", "keystores", n, "err", err)
					continue
				}
				logger.Info("SIGHUP: TLS files reloaded", "keystores", n)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

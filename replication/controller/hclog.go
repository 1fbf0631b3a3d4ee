package controller

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter routes raft's hclog output to slog. raft logs every
// election and every dropped connection at INFO and above, so only WARN and
// above are passed on; hclog's key-value pairs become slog attributes.
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
	// quiet lists messages logged at debug level whatever raft's level:
	// the election a local quorum's only voter holds at every start is
	// not worth a warning.
	quiet map[string]bool
}

func newHCLog(l *slog.Logger, name string, quiet ...string) hclog.Logger {
	a := &hclogAdapter{l: l, name: name}
	for _, m := range quiet {
		if a.quiet == nil {
			a.quiet = map[string]bool{}
		}
		a.quiet[m] = true
	}
	return a
}

const hclogMin = hclog.Warn

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level < hclogMin || level == hclog.Off {
		return
	}
	all := make([]any, 0, len(a.args)+len(args)+2)
	all = append(all, "logger", a.name)
	all = append(all, a.args...)
	all = append(all, args...)
	if a.quiet[msg] {
		level = hclog.Debug
	}
	a.l.Log(context.Background(), slogLevel(level), msg, all...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                 { return false }
func (a *hclogAdapter) IsDebug() bool                 { return false }
func (a *hclogAdapter) IsInfo() bool                  { return false }
func (a *hclogAdapter) IsWarn() bool                  { return true }
func (a *hclogAdapter) IsError() bool                 { return true }
func (a *hclogAdapter) ImpliedArgs() []any            { return a.args }
func (a *hclogAdapter) Name() string                  { return a.name }
func (a *hclogAdapter) SetLevel(hclog.Level)          {}
func (a *hclogAdapter) GetLevel() hclog.Level         { return hclogMin }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any(nil), a.args...), args...)
	return &c
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slogWriter{a}
}

// slogWriter passes lines written through a standard logger on at WARN.
type slogWriter struct{ a *hclogAdapter }

func (w slogWriter) Write(p []byte) (int, error) {
	w.a.Log(hclog.Warn, string(p))
	return len(p), nil
}

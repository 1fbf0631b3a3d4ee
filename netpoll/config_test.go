package netpoll

import (
	"errors"
	"testing"
)

// Config.IO chooses the implementation; an empty IO keeps Portable's
// meaning, and an unknown one is a configuration error.
func TestConfigIO(t *testing.T) {
	for _, tc := range []struct {
		io       string
		portable bool
		want     string
	}{
		{"", false, IOUring},
		{"", true, IOPortable},
		{IOUring, true, IOUring}, // IO wins over Portable
		{IOPortable, false, IOPortable},
		{IOGnet, true, IOGnet},
	} {
		cfg, err := Config{Addr: "127.0.0.1:0", IO: tc.io, Portable: tc.portable}.withDefaults()
		if err != nil || cfg.IO != tc.want {
			t.Errorf("IO %q, Portable %v: %q, %v; want %q", tc.io, tc.portable, cfg.IO, err, tc.want)
		}
	}
	if _, err := (Config{Addr: "127.0.0.1:0", IO: "epoll"}).withDefaults(); !errors.Is(err, ErrConfig) {
		t.Fatalf("unknown IO: %v, want ErrConfig", err)
	}
}

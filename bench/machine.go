package bench

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// machine describes where the figures were measured; every report and
// plot states it.
type machine struct {
	date      time.Time
	cpu       string
	cores     int
	memGiB    float64
	kernel    string
	os        string
	fs        string // file system of the brokers' data
	virtual   bool   // the CPU reports a hypervisor
	loadStart string // /proc/loadavg when the suite started
	goVersion string
}

func describeMachine(dataDir string) machine {
	m := machine{date: time.Now().UTC(), cores: runtime.NumCPU(), os: runtime.GOOS + "/" + runtime.GOARCH,
		goVersion: runtime.Version(), fs: fsType(dataDir), cpu: "unknown CPU", kernel: runtime.GOOS}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				m.cpu = strings.TrimSpace(v)
			case "flags":
				m.virtual = strings.Contains(v, " hypervisor")
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		for _, l := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(l, "MemTotal: %f kB", &kb); err == nil {
				m.memGiB = kb / (1 << 20)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	m.loadStart = loadAvg()
	return m
}

// loadAvg is the 1, 5 and 15 minute load averages: how busy the machine
// was with other work, which the figures cannot subtract.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// String is the one-line description.
func (m machine) String() string {
	s := fmt.Sprintf("%s, %d cores", m.cpu, m.cores)
	if m.virtual {
		s += " (virtual machine)"
	}
	if m.memGiB > 0 {
		s += fmt.Sprintf(", %.0f GiB RAM", m.memGiB)
	}
	return s + fmt.Sprintf(", %s, %s, data on %s", m.kernel, m.goVersion, m.fs)
}

package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// limitsSample is this machine's own limits, measured in the same run as
// the peers so that ratios to them mean something on a shared machine.
type limitsSample struct {
	diskMBs   float64 // sequential write with O_DIRECT, 1 MiB blocks
	diskHow   string
	diskErr   string
	syncRate  float64 // 4 KiB writes each followed by fdatasync, per second
	syncHow   string
	syncErr   string
	tcpMBs    float64 // one loopback TCP stream
	tcpErr    string
	loadAfter string
}

// measureLimits measures the disk, fdatasync and loopback TCP, each
// bounded in time.
func measureLimits(ctx context.Context, dir string, quick bool) limitsSample {
	run := 3 * time.Second
	size := int64(1 << 30)
	if quick {
		run, size = time.Second, 256<<20
	}
	var l limitsSample
	if fio, err := exec.LookPath("fio"); err == nil {
		l.diskHow = "fio " + fioVersion(fio) + ": sequential write, 1 MiB blocks, O_DIRECT, psync"
		l.diskMBs, err = fioRun(ctx, fio, dir, 48, run, "--rw=write", "--bs=1M", "--direct=1",
			fmt.Sprintf("--size=%d", size))
		if err == nil {
			l.diskMBs = l.diskMBs * 1024 / 1e6 // fio reports KiB/s
		} else {
			l.diskErr = err.Error()
		}
		l.syncHow = "fio " + fioVersion(fio) + ": 4 KiB sequential writes, fdatasync after each"
		l.syncRate, err = fioRun(ctx, fio, dir, 49, run, "--rw=write", "--bs=4k", "--fdatasync=1", "--size=64m")
		if err != nil {
			l.syncErr = err.Error()
		}
	} else {
		l.diskHow = "built-in writer (fio not installed): sequential write, 1 MiB blocks, " + directIOName
		mbs, err := directWrite(ctx, filepath.Join(dir, "limits.data"), size, run)
		l.diskMBs = mbs
		if err != nil {
			l.diskErr = err.Error()
		}
		l.syncHow = "built-in writer (fio not installed): 4 KiB sequential writes, fdatasync after each"
		rate, err := syncWrites(ctx, filepath.Join(dir, "limits.sync"), run)
		l.syncRate = rate
		if err != nil {
			l.syncErr = err.Error()
		}
	}
	mbs, err := loopbackTCP(ctx, run)
	l.tcpMBs = mbs
	if err != nil {
		l.tcpErr = err.Error()
	}
	l.loadAfter = loadAvg()
	return l
}

func fioVersion(path string) string {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "(version unknown)"
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "fio-")
}

// fioRun runs one fio job on a file in dir for at most run and returns the
// given field of its terse (v3) output: 48 is write KiB/s, 49 write IOPS.
func fioRun(ctx context.Context, fio, dir string, field int, run time.Duration, args ...string) (float64, error) {
	file := filepath.Join(dir, "limits.fio")
	defer os.Remove(file)
	ctx, cancel := context.WithTimeout(ctx, run+30*time.Second)
	defer cancel()
	all := append([]string{"--name=limits", "--filename=" + file, "--ioengine=psync",
		fmt.Sprintf("--runtime=%dms", run.Milliseconds()), "--output-format=terse", "--terse-version=3"}, args...)
	out, err := runCommand(ctx, fio, all...)
	if err != nil {
		return 0, err
	}
	f := strings.Split(strings.TrimSpace(string(out)), ";")
	if len(f) < field {
		return 0, fmt.Errorf("fio: %d fields in its terse output", len(f))
	}
	v, err := strconv.ParseFloat(f[field-1], 64)
	if err != nil {
		return 0, fmt.Errorf("fio: field %d: %w", field, err)
	}
	return v, nil
}

// directWrite writes size bytes sequentially in 1 MiB blocks bypassing the
// page cache (where the OS allows), for at most run, and returns MB/s.
func directWrite(ctx context.Context, path string, size int64, run time.Duration) (float64, error) {
	f, err := openDirect(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := alignedBlock(1 << 20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	start := time.Now()
	var n int64
	for n < size && time.Since(start) < run && ctx.Err() == nil {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// syncWrites appends 4 KiB blocks, each followed by fdatasync, for run,
// and returns the syncs per second.
func syncWrites(ctx context.Context, path string, run time.Duration) (float64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 4096)
	start := time.Now()
	n := 0
	for time.Since(start) < run && ctx.Err() == nil {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := datasync(f); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// loopbackTCP streams 256 KiB writes through one loopback connection for
// run and returns MB/s: the most one producer's connection could carry
// here if the broker cost nothing.
func loopbackTCP(ctx context.Context, run time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var got int64
	var rerr error
	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			rerr = err
			return
		}
		defer c.Close()
		got, rerr = io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	start := time.Now()
	for time.Since(start) < run && ctx.Err() == nil {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, err
		}
	}
	c.Close()
	wg.Wait()
	elapsed := time.Since(start)
	if rerr != nil {
		return 0, rerr
	}
	return float64(got) / 1e6 / elapsed.Seconds(), nil
}

package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a progress bar on a terminal (one line redrawn in place)
// and prints one line per step elsewhere (CI logs, pipes), with the time
// spent and a guess of the time left, bounded by the suite's deadline.
type progress struct {
	w        io.Writer
	tty      bool
	total    int
	n        int
	start    time.Time
	deadline time.Time
	last     string
}

func newProgress(w io.Writer, total int, deadline time.Time) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, tty: tty, total: max(total, 1), start: time.Now(), deadline: deadline}
}

const barWidth = 24

// step announces the next unit of work.
func (p *progress) step(what string) {
	p.n++
	p.last = what
	p.draw()
}

// note prints a line above the bar.
func (p *progress) note(what string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", what)
		p.draw()
		return
	}
	fmt.Fprintln(p.w, what)
}

func (p *progress) draw() {
	elapsed := time.Since(p.start)
	done := min(p.n-1, p.total)
	left := "?"
	if done > 0 {
		est := time.Duration(float64(elapsed) / float64(done) * float64(p.total-done))
		est = min(est, time.Until(p.deadline))
		left = "~" + est.Round(time.Second).String()
	}
	fill := barWidth * done / p.total
	bar := strings.Repeat("█", fill) + strings.Repeat("░", barWidth-fill)
	line := fmt.Sprintf("[%s] %d/%d %s elapsed, %s left · %s", bar, min(p.n, p.total), p.total,
		elapsed.Round(time.Second), left, p.last)
	if p.tty {
		if len(line) > 160 {
			line = line[:157] + "..."
		}
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// done ends the bar.
func (p *progress) done() {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "measured in %s\n", time.Since(p.start).Round(time.Second))
}

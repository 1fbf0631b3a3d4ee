package bench

import (
	"fmt"
	"math"
	"strings"
)

// fmtCount prints a count or rate with three significant digits.
func fmtCount(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return trim3(v/1e9) + "G"
	case a >= 1e6:
		return trim3(v/1e6) + "M"
	case a >= 1e3:
		return trim3(v/1e3) + "k"
	}
	return trim3(v)
}

// trim3 prints v with three significant digits.
func trim3(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// fmtRecords prints a number of records: whole below a thousand.
func fmtRecords(v float64) string {
	if math.Abs(v) < 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmtCount(v)
}

func fmtMBs(v float64) string { return trim3(v) }

// fmtMicros prints a latency given in microseconds.
func fmtMicros(us float64) string {
	switch {
	case us >= 1e6:
		return trim3(us/1e6) + " s"
	case us >= 1e3:
		return trim3(us/1e3) + " ms"
	}
	return fmt.Sprintf("%.0f µs", us)
}

func fmtSeconds(v float64) string { return trim3(v) }

func fmtMiB(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }

func fmtPct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// fmtRatio prints a ratio as the report quotes them: 0.83x.
func fmtRatio(r float64) string {
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return "—"
	}
	return fmt.Sprintf("%.2fx", r)
}

// mdEscape makes text safe inside a markdown table cell, and short: it
// is for reasons, which may quote a log line.
func mdEscape(s string) string {
	s = mdEscapeLong(s)
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return s
}

// mdEscapeLong makes text safe inside a markdown table cell, whatever its
// length.
func mdEscapeLong(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	return strings.ReplaceAll(s, "\n", " ")
}

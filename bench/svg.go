package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The plots are plain SVG written by hand: a few rectangles, lines and
// labels need no plotting library, and the files stay small enough to
// commit next to the README.

const (
	plotThroughput = "throughput.svg"
	plotLatency    = "latency.svg"
)

var peerColors = map[string]string{
	"ringlog-uring":    "#1f77b4",
	"ringlog-portable": "#ff7f0e",
	"kfake":            "#2ca02c",
	"nats":             "#9467bd",
	"ringlog-cluster":  "#8c564b",
	"kafka":            "#d62728",
	"kafka-cluster":    "#e377c2",
	saslSSLPeer:        "#17becf",
	netUringPeer:       "#bcbd22",
	netLoopsPeer:       "#7f7f7f",
	bufferedPeer:       "#393b79",
}

func esc(s string) string { return html.EscapeString(s) }

// svgText writes a label.
func svgText(w io.Writer, x, y float64, size int, anchor, fill, text string) {
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" fill="%s">%s</text>`+"\n",
		x, y, size, anchor, fill, esc(text))
}

// caption is what every plot states under its title: machine, date, runs.
func (s *suite) caption(whiskers bool) string {
	runs := "medians of " + fmt.Sprint(s.cfg.runs) + " runs"
	if whiskers {
		runs += ", whiskers min–max"
	}
	if s.cfg.runs == 1 {
		runs = "one run (-quick)"
	}
	return fmt.Sprintf("%s · %s UTC · %s", s.machine.String(), s.machine.date.Format("2006-01-02"), runs)
}

// writeThroughputSVG draws MB/s per peer for every throughput table:
// horizontal bars grouped by measurement, a whisker from the lowest to the
// highest run.
func (s *suite) writeThroughputSVG(w io.Writer) {
	var ts []*table
	for _, t := range s.tables {
		if t.kind != tableLatency {
			ts = append(ts, t)
		}
	}
	const (
		left, right = 300.0, 90.0
		barH, gap   = 13.0, 12.0
		width       = 1000.0
		top         = 78.0
	)
	peers := matrixSpecs()
	groupH := float64(len(peers))*barH + gap
	height := top + float64(len(ts))*groupH + 40
	maxV := 0.0
	for _, t := range ts {
		for _, r := range t.rows {
			if sp, ok := r.spread(metricMBs); ok {
				maxV = max(maxV, sp.max)
			}
		}
	}
	if maxV == 0 {
		maxV = 1
	}
	scale := (width - left - right) / maxV
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n",
		width, height, width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	svgText(w, 10, 22, 16, "start", "#000", "Throughput: MB/s of record values, each peer in the same run and workload")
	svgText(w, 10, 40, 11, "start", "#444", s.caption(true))
	// Legend.
	legend(w, peers)
	// Grid.
	for _, g := range niceTicks(maxV) {
		gx := left + g*scale
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", gx, top-6, gx, height-34)
		svgText(w, gx, height-20, 10, "middle", "#444", strings.TrimSuffix(strings.TrimSuffix(trim3(g), ".00"), ".0"))
	}
	svgText(w, left+(width-left-right)/2, height-6, 11, "middle", "#000", "MB/s")
	for i, t := range ts {
		y0 := top + float64(i)*groupH
		svgText(w, left-8, y0+float64(len(peers))*barH/2+4, 11, "end", "#000", fmt.Sprintf("%d. %s", s.tableNumber(t), t.plotLabel()))
		for j, spec := range peers {
			y := y0 + float64(j)*barH
			id := spec.key
			if t.w.fsync {
				id += "+fsync"
			}
			r := t.rows[id]
			sp, ok := r.spread(metricMBs)
			if !ok {
				status, _ := r.state()
				if status == "" {
					status = "no figure"
				}
				svgText(w, left+4, y+barH-3, 9, "start", "#888", spec.name+": "+status)
				continue
			}
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s MB/s</title></rect>`+"\n",
				left, y+1, math.Max(1, sp.med*scale), barH-2, peerColors[spec.key], esc(spec.name), fmtMBs(sp.med))
			if sp.n > 1 {
				fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-width="1"/>`+"\n",
					left+sp.min*scale, y+barH/2, left+sp.max*scale, y+barH/2)
			}
			svgText(w, left+sp.max*scale+4, y+barH-3, 9, "start", "#000", fmtMBs(sp.med))
		}
	}
	fmt.Fprintln(w, "</svg>")
}

// legend draws a colour key for the peers.
// Keys go on a second line, above the plots' tops (78 px and more), once
// the first would pass 990 px: the narrowest plot is 1000 px wide.
func legend(w io.Writer, peers []peerSpec) {
	x, y := 10.0, 50.0
	for _, p := range peers {
		width := 14 + 6.5*float64(len(p.name)) + 16
		if x+width > 990 && x > 10 {
			x, y = 10, y+14
		}
		fmt.Fprintf(w, `<rect x="%.1f" y="%.0f" width="10" height="10" fill="%s"/>`+"\n", x, y, peerColors[p.key])
		svgText(w, x+14, y+9, 11, "start", "#000", p.name)
		x += width
	}
}

// decadeName labels a power of ten of microseconds: 100 µs, 1 ms, 10 s.
func decadeName(d float64) string {
	us := math.Pow(10, d)
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.0f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.0f ms", us/1e3)
	}
	return fmt.Sprintf("%.0f µs", us)
}

// tableNumber is a table's number in the report.
func (s *suite) tableNumber(t *table) int {
	for i, u := range s.tables {
		if u == t {
			return i + 1
		}
	}
	return 0
}

// niceTicks returns 4 to 8 round grid values from 0 to at least v.
func niceTicks(v float64) []float64 {
	step := math.Pow(10, math.Floor(math.Log10(v)))
	for v/step < 4 {
		step /= 2
	}
	for v/step > 8 {
		step *= 2
	}
	var ts []float64
	for t := 0.0; t <= v*1.0001; t += step {
		ts = append(ts, t)
	}
	return ts
}

// writeLatencySVG draws latency distributions: for the open-loop produce
// table and the end-to-end table, one curve per peer, x the latency (log
// scale), y the fraction of records at or below it on a scale that
// stretches the tail (0, 90, 99, 99.9, 99.99%).
func (s *suite) writeLatencySVG(w io.Writer) {
	panels := []*table{
		s.findTable(partProduce, baseLike(kindLatency, 1024, false)),
		s.findTable(partConsume, baseLike(kindE2E, 1024, false)),
	}
	const width, height, panelW, top = 1060.0, 430.0, 455.0, 80.0
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n",
		width, height, width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	svgText(w, 10, 22, 16, "start", "#000", fmt.Sprintf("Latency distribution at %s records/s (open loop, no coordinated omission)", fmtCount(s.rate)))
	svgText(w, 10, 40, 11, "start", "#444", s.caption(false)+": every run's records merged")
	legend(w, matrixSpecs())
	for i, t := range panels {
		// The panels are apart by more than half an axis label.
		px := 60 + float64(i)*(panelW+80)
		title := []string{"produce: planned send → acknowledgement", "end to end: planned send → consumer"}[i]
		s.latencyPanel(w, t, px, top, panelW-40, height-top-50, title)
	}
	fmt.Fprintln(w, "</svg>")
}

// latencyPanel draws one panel of writeLatencySVG.
func (s *suite) latencyPanel(w io.Writer, t *table, x0, y0, pw, ph float64, title string) {
	svgText(w, x0+pw/2, y0+4, 12, "middle", "#000", title)
	y0 += 14
	fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", x0, y0, pw, ph)
	if t == nil {
		svgText(w, x0+pw/2, y0+ph/2, 12, "middle", "#888", "not measured in this matrix")
		return
	}
	hs := map[string]*hdrhistogram.Histogram{}
	lo, hi := math.Inf(1), 0.0
	for _, spec := range matrixSpecs() {
		r := t.rows[spec.key]
		if r == nil || len(r.samples) == 0 {
			continue
		}
		h := newHist()
		for _, smp := range r.samples {
			if smp.lat != nil {
				h.Merge(smp.lat)
			}
		}
		if h.TotalCount() == 0 {
			continue
		}
		hs[spec.key] = h
		lo, hi = math.Min(lo, float64(max(1, h.Min()))), math.Max(hi, float64(h.Max()))
	}
	if len(hs) == 0 {
		svgText(w, x0+pw/2, y0+ph/2, 12, "middle", "#888", "no latency measured")
		return
	}
	// x: decades of microseconds covering every curve.
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dHi <= dLo {
		dHi = dLo + 1
	}
	const nines = 5.0 // y axis up to 99.999%
	xOf := func(us float64) float64 { return x0 + (math.Log10(math.Max(us, 1))-dLo)/(dHi-dLo)*pw }
	yOf := func(n float64) float64 { return y0 + ph - n/nines*ph }
	for d := dLo; d <= dHi; d++ {
		gx := xOf(math.Pow(10, d))
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", gx, y0, gx, y0+ph)
		svgText(w, gx, y0+ph+14, 10, "middle", "#444", decadeName(d))
	}
	for n, label := range []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"} {
		gy := yOf(float64(n))
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, gy, x0+pw, gy)
		svgText(w, x0-4, gy+4, 10, "end", "#444", label)
	}
	svgText(w, x0+pw/2, y0+ph+30, 11, "middle", "#000", "latency (log scale)")
	for _, spec := range matrixSpecs() {
		h := hs[spec.key]
		if h == nil {
			continue
		}
		// Only as far into the tail as the records can tell: with n
		// records, quantiles beyond 1-1/n are the maximum.
		top := math.Min(nines, math.Log10(float64(h.TotalCount())))
		var pts []string
		for i := 0; i <= 200; i++ {
			n := top * float64(i) / 200
			q := 100 * (1 - math.Pow(10, -n))
			v := float64(h.ValueAtQuantile(q))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(v), yOf(n)))
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"><title>%s</title></polyline>`+"\n",
			peerColors[spec.key], strings.Join(pts, " "), esc(spec.name))
	}
}

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// scrapeMetrics reads the unlabelled samples of a broker's Prometheus
// /metrics page (text exposition format). Labelled series are skipped: the
// suite reads only process-wide counters.
func scrapeMetrics(ctx context.Context, admin string) (map[string]float64, error) {
	return readMetricsPage(ctx, admin, parseMetrics)
}

// readMetricsPage fetches a broker's /metrics page (5 s at most) and hands
// its body to parse.
func readMetricsPage[T any](ctx context.Context, admin string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return zero, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return zero, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return zero, fmt.Errorf("bench: %s/metrics: %s", admin, resp.Status)
	}
	return parse(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		if i := strings.IndexByte(l, '{'); i >= 0 {
			// A labelled series counts towards its metric's sum over
			// every label set, under the name with "{}".
			j := strings.LastIndexByte(l, '}')
			if j < i {
				continue
			}
			if f := strings.Fields(l[j+1:]); len(f) > 0 {
				if v, err := strconv.ParseFloat(f[0], 64); err == nil {
					m[l[:i]+"{}"] += v
				}
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		m[f[0]] = v
	}
	return m, sc.Err()
}

// partitionOffsets are one partition's offsets on one broker.
type partitionOffsets struct {
	leo, hw int64
	hasLEO  bool
	hasHW   bool
}

// scrapePartitionOffsets reads every partition's LEO and HW of topic from
// a ringlog broker's /metrics (ringlog_log_end_offset and
// ringlog_high_watermark, labelled by topic and partition).
func scrapePartitionOffsets(ctx context.Context, admin, topic string) (map[int32]partitionOffsets, error) {
	return readMetricsPage(ctx, admin, func(r io.Reader) (map[int32]partitionOffsets, error) {
		return parsePartitionOffsets(r, topic)
	})
}

func parsePartitionOffsets(r io.Reader, topic string) (map[int32]partitionOffsets, error) {
	m := map[int32]partitionOffsets{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		name, rest, ok := strings.Cut(l, "{")
		if !ok || (name != "ringlog_log_end_offset" && name != "ringlog_high_watermark") {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		var t, part string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "topic":
				t = v
			case "partition":
				part = v
			}
		}
		if t != topic {
			continue
		}
		p, err1 := strconv.ParseInt(part, 10, 32)
		v, err2 := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		o := m[int32(p)]
		if name == "ringlog_log_end_offset" {
			o.leo, o.hasLEO = int64(v), true
		} else {
			o.hw, o.hasHW = int64(v), true
		}
		m[int32(p)] = o
	}
	return m, sc.Err()
}

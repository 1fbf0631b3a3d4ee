package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v2"

	"ringlog/internal/testkit"
)

// The dashboard and alert rules operators load (deploy/), checked against
// what a broker exports: a query of a metric that does not exist draws an
// empty panel or an alert that never fires, and nothing says so.
const (
	dashboardFile = "../../deploy/grafana/ringlog.json"
	alertsFile    = "../../deploy/prometheus/alerts.yml"
)

// scrapeMade are the series Prometheus makes itself for every target
// rather than reading them from /metrics.
var scrapeMade = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

// TestDeployQueriesExportedMetrics starts the binary (on io_uring, so that
// the ring metrics exist), produces to a topic and consumes it in a group
// that commits (so that the lag and the request histograms have series),
// scrapes -admin's /metrics, and checks that every metric the dashboard's
// panels and variables and the alert rules query is on the page.
func TestDeployQueriesExportedMetrics(t *testing.T) {
	queried := map[string][]string{} // metric -> where it is queried
	for _, q := range dashboardQueries(t, dashboardFile) {
		for _, m := range promQLMetrics(q) {
			queried[m] = append(queried[m], "dashboard: "+q)
		}
	}
	for _, q := range alertQueries(t, alertsFile) {
		for _, m := range promQLMetrics(q) {
			queried[m] = append(queried[m], "alerts: "+q)
		}
	}
	if len(queried) < 20 {
		t.Fatalf("only %d metrics found in the dashboard and the alerts: the query parser lost them", len(queried))
	}

	// The group joins at once, with few offsets partitions to open.
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("group.initial.rebalance.delay.ms=0\noffsets.topic.num.partitions=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, admin := testkit.FreeAddr(t), testkit.FreeAddr(t)
	p := start(t, "-listen", addr, "-data-dir", t.TempDir(), "-admin", admin, "-io", "uring", "-shards", "2", "-config", props)
	p.waitFor(t, "ringlog started")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("watched"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 20 {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("watchers"), kgo.ConsumeTopics("watched"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for read := 0; read < 10; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		read += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	exported := scrapeNames(t, "http://"+admin+"/metrics")
	var missing []string
	for m, where := range queried {
		if !exported[m] && !scrapeMade[m] {
			missing = append(missing, fmt.Sprintf("%s (%s)", m, where[0]))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("queried but not exported by the broker:\n  %s", strings.Join(missing, "\n  "))
	}
}

// dashboardQueries returns every PromQL expression of a Grafana dashboard:
// each target's expr, at any depth (rows nest panels), and the variables'
// label_values queries.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(c, k)
			}
		case []any:
			for _, c := range v {
				walk(c, key)
			}
		case string:
			switch {
			case key == "expr":
				out = append(out, v)
			case (key == "query" || key == "definition") && strings.HasPrefix(v, "label_values("):
				// label_values(metric, label): the metric is the query.
				inner := strings.TrimSuffix(strings.TrimPrefix(v, "label_values("), ")")
				if i := strings.LastIndexByte(inner, ','); i >= 0 {
					inner = inner[:i]
				}
				out = append(out, inner)
			}
		}
	}
	walk(d, "")
	if len(out) == 0 {
		t.Fatalf("%s: no queries", path)
	}
	return out
}

// alertRule is a rule of a Prometheus rule file, every field Prometheus
// knows (the file is read strictly: a misspelt key fails).
type alertRule struct {
	Alert, Record, Expr string
	For                 string `yaml:"for"`
	KeepFiringFor       string `yaml:"keep_firing_for"`
	Labels, Annotations map[string]string
}

// loadAlertRules reads a Prometheus rule file's rules.
func loadAlertRules(t *testing.T, path string) []alertRule {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []alertRule
		}
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no rules", path)
	}
	return out
}

// alertQueries returns the expr of every rule of a Prometheus rule file.
func alertQueries(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, r := range loadAlertRules(t, path) {
		if r.Expr == "" {
			t.Errorf("%s: rule %s%s has no expr", path, r.Alert, r.Record)
		}
		out = append(out, r.Expr)
	}
	return out
}

var (
	// Strings, label matchers and range selectors hold no metric names
	// (label values, label names, durations, Grafana's $__rate_interval).
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promBraces   = regexp.MustCompile(`\{[^{}]*\}`)
	promBrackets = regexp.MustCompile(`\[[^\[\]]*\]`)
	// Grouping and vector-matching clauses list label names.
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promVar      = regexp.MustCompile(`\$\{?\w+\}?`)
	// A token is a number (with its exponent or duration unit) or a name.
	promToken = regexp.MustCompile(`[0-9][0-9a-zA-Z_.]*|[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// promKeywords are PromQL's words that are not metrics.
var promKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "offset": true, "bool": true, "inf": true, "nan": true, "Inf": true, "NaN": true,
}

// promQLMetrics returns the metric names a PromQL expression selects: the
// names left once strings, label matchers, ranges, grouping clauses and
// Grafana variables are removed, that are not keywords, numbers or
// functions (a name followed by "(").
func promQLMetrics(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promBraces.ReplaceAllString(s, " ")
	s = promBrackets.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	s = promVar.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range promToken.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		if tok[0] >= '0' && tok[0] <= '9' || promKeywords[tok] {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or aggregation
		}
		if !slices.Contains(out, tok) {
			out = append(out, tok)
		}
	}
	return out
}

// TestPromQLMetrics: the names promQLMetrics finds in the shapes of query
// the dashboard and the alerts use.
func TestPromQLMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="ringlog"} == 0`, []string{"up"}},
		{`sum by (instance) (rate(a_total{job=~"$job"}[$__rate_interval]))`, []string{"a_total"}},
		{`histogram_quantile(0.99, sum by (request, le) (rate(x_bucket{request="Produce", job="a,b"}[5m]))) > 500`, []string{"x_bucket"}},
		{`1 - u{dir="/d"} / t{dir="/d"}`, []string{"u", "t"}},
		{`sum(a) > 1000 and sum by (group) (deriv(b[15m])) > 0`, []string{"a", "b"}},
		{`predict_linear(u[6h], 24 * 3600) < 0 or on (instance) c offset 5m`, []string{"u", "c"}},
		{`max without (shard) (d) / ignoring (x) group_left (y) e`, []string{"d", "e"}},
		{`sum(rate(f[1m])) by (le)`, []string{"f"}},
		{`1e3 * g`, []string{"g"}},
		{`label_values(h, job)`, []string{"h"}}, // as dashboardQueries passes only "h"
	} {
		expr := tc.expr
		if strings.HasPrefix(expr, "label_values(") {
			expr = "h"
		}
		if got := promQLMetrics(expr); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// scrapeSeries reads one series (a name, with its labels as the page
// writes them) from a Prometheus text page; false when the page lacks it.
func scrapeSeries(t *testing.T, url, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

// scrapeNames returns the metric names on a Prometheus text page (a
// histogram's _bucket, _sum and _count each).
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

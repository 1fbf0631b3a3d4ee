package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// profileResult is the broker's CPU profile during the main produce run.
type profileResult struct {
	peer    string
	file    string // saved raw, for go tool pprof
	seconds int
	total   time.Duration // CPU time sampled
	top     []profileEntry
	err     string
}

// profileEntry is one function: its own CPU time (flat) and the time
// spent in it and what it called (cum).
type profileEntry struct {
	name      string
	flat, cum time.Duration
}

const profileTopN = 15

// captureProfile fetches a CPU profile of seconds from a ringlog broker's
// admin listener (/debug/pprof/profile), saves it in outDir and ranks its
// functions.
func captureProfile(ctx context.Context, p *peer, seconds int, outDir string) *profileResult {
	r := &profileResult{peer: p.spec.name, seconds: seconds}
	fail := func(err error) *profileResult {
		r.err = err.Error()
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.admins[0], seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fail(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(raw)))
	}
	r.file = "cpu-" + p.spec.key + ".pb.gz"
	if err := os.WriteFile(filepath.Join(outDir, r.file), raw, 0o644); err != nil {
		return fail(err)
	}
	prof, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		return fail(fmt.Errorf("parsing the profile: %w", err))
	}
	r.total, r.top, err = topFunctions(prof, profileTopN)
	if err != nil {
		return fail(err)
	}
	return r
}

// topFunctions ranks a CPU profile's functions by flat time (the leaf of
// each sample, inlined frames resolved to the innermost function), as
// `go tool pprof -top` does, with each one's cumulative time.
func topFunctions(p *profile.Profile, n int) (time.Duration, []profileEntry, error) {
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return 0, nil, fmt.Errorf("the profile has no cpu/nanoseconds samples")
	}
	flat := map[string]int64{}
	cum := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		seen := map[string]bool{}
		for li, loc := range s.Location {
			// Line[0] is the innermost of the inlined functions at loc.
			for k, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if li == 0 && k == 0 {
					flat[name] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	var es []profileEntry
	for name, f := range flat {
		es = append(es, profileEntry{name: name, flat: time.Duration(f), cum: time.Duration(cum[name])})
	}
	slices.SortFunc(es, func(a, b profileEntry) int {
		if c := cmp.Compare(b.flat, a.flat); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return time.Duration(total), es[:min(n, len(es))], nil
}

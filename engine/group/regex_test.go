package group

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRegexBound: a SubscribedTopicRegex is at most RegexMaxBytes (Kafka's
// protocol string limit, beyond which Kafka cannot decode the request); a
// longer one is refused before anything compiles it. ringlog compiled
// regexes of up to 1 MiB (the member metadata limit) on the shard.
func TestRegexBound(t *testing.T) {
	h := newHarness(t)
	h.topics.set("t", 1)
	join := func(member, re string) *kmsg.ConsumerGroupHeartbeatResponse {
		r := joinReq(member)
		r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, kmsg.StringPtr(re)
		return h.do(r)
	}
	longest := "t|" + strings.Repeat("x", RegexMaxBytes-2)
	wantErr(t, "a regex of RegexMaxBytes", join("a", longest), nil)
	wantErr(t, "one byte more", join("b", longest+"x"), kerr.InvalidRequest)
	wantErr(t, "1 MiB", join("c", strings.Repeat("x", 1<<20)), kerr.InvalidRequest)
	if h.regexes.compiles != 1 {
		t.Fatalf("%d compilations, want 1 (the longest regex)", h.regexes.compiles)
	}
	if _, err := compileSubscription(longest + "x"); err == nil {
		t.Fatal("compileSubscription took a regex above the bound")
	}
}

// TestRegexCompiledOnce: each distinct regex is compiled once for every
// group and member that subscribes with it and every change of the topics,
// not once per heartbeat or per resolution; the heartbeat's goroutine
// compiles it before the shard runs (Coordinator.ConsumerGroupHeartbeat),
// so that the shard only looks it up.
func TestRegexCompiledOnce(t *testing.T) {
	h := newHarness(t)
	h.topics.set("t-1", 1)
	join := func(member, re string) {
		r := joinReq(member)
		r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, kmsg.StringPtr(re)
		wantErr(t, "join "+member, h.do(r), nil)
	}
	join("a", "t-.*")
	join("b", "t-.*")
	h.topics.set("t-2", 1) // the topics change: the regex is matched again
	h.do(beat("a", h.cg.members["a"].cur.epoch, nil))
	join("c", "u-.*")
	if h.regexes.compiles != 2 {
		t.Fatalf("%d compilations of 2 distinct regexes", h.regexes.compiles)
	}
	// A second group shares the cache.
	other := newCgroup("g2")
	req := joinReq("d")
	req.Group, req.SubscribedTopicNames, req.SubscribedTopicRegex = "g2", nil, kmsg.StringPtr("t-.*")
	if r, _ := other.heartbeat(h.env(), Client{}, req); r.ErrorCode != 0 {
		t.Fatalf("second group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if h.regexes.compiles != 2 {
		t.Fatalf("%d compilations after a second group", h.regexes.compiles)
	}
	// An invalid regex is compiled once too, and refused each time.
	for range 3 {
		r := joinReq("e")
		r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, kmsg.StringPtr("t(")
		wantErr(t, "invalid", h.do(r), kerr.InvalidRegularExpression)
	}
	if h.regexes.compiles != 3 {
		t.Fatalf("%d compilations after an invalid regex thrice", h.regexes.compiles)
	}
}

// TestRegexCacheBounded: the cache holds at most regexCacheMax regexes.
func TestRegexCacheBounded(t *testing.T) {
	var c regexCache
	for i := range regexCacheMax + 10 {
		if _, err := c.compile("r" + strings.Repeat("x", i%50) + "-" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.entries) > regexCacheMax {
		t.Fatalf("%d entries", len(c.entries))
	}
}

// TestRegexAnchoredWhole: a subscription matches whole topic names, as
// RE2/J's matches() does, and a regex with unbalanced parentheses is
// invalid, not taken apart by the anchoring group ("a)|(b" once compiled
// to "^(?:a)|(b)$", matching "ab" and "xb").
func TestRegexAnchoredWhole(t *testing.T) {
	for _, re := range []string{"a)|(b", "(a", "a)", `a\`} {
		if _, err := compileSubscription(re); err == nil {
			t.Errorf("%q compiled", re)
		}
	}
	rx, err := compileSubscription("t-.|u")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"t-1": true, "u": true, "t-12": false, "xu": false, "ut": false} {
		if got := rx.MatchString(name); got != want {
			t.Errorf("%q matches %q: %v, want %v", "t-.|u", name, got, want)
		}
	}
}

package group

import (
	"fmt"
	"regexp"
	"sync"
)

// KIP-848 regular-expression subscriptions (SubscribedTopicRegex) are
// client input that the coordinator compiles and matches against every
// topic. Two bounds keep that cheap and off the shards:
//
//   - a regex is at most RegexMaxBytes long. That is Kafka's own bound: a
//     protocol string is at most 32,767 bytes, and Kafka 4.4 cannot decode
//     a ConsumerGroupHeartbeat with a longer regex (it closes the
//     connection; kafka/68_consumer_group_heartbeat.go does the same). Go's
//     regexp compiles in time and memory linear in the pattern, so the
//     bound is also the bound on one compilation.
//   - each distinct regex is compiled once, into a cache shared by every
//     group of the coordinator, on the goroutine that received the
//     heartbeat (or that replayed the group from the log), before the
//     request goes to the shard: the shard only looks the result up. Only
//     a regex evicted from the cache in between is compiled on the shard,
//     within the same length bound.
const RegexMaxBytes = 32767

// regexCacheMax bounds the distinct regexes the cache holds. Past it an
// arbitrary entry is evicted: what it held is compiled again when next
// needed, which costs time, never correctness.
const regexCacheMax = 4096

// compiledRegex is a regex's compilation: the program, or why there is
// none (INVALID_REGULAR_EXPRESSION).
type compiledRegex struct {
	rx  *regexp.Regexp
	err error
}

// regexCache holds the compiled subscriptions of a coordinator's groups.
// Any goroutine may call it.
type regexCache struct {
	mu      sync.Mutex
	entries map[string]*compiledRegex
	// compiles counts compilations, for tests of the once-per-regex rule.
	compiles int
}

// compile returns re's compilation, compiling it if the cache does not
// hold it.
func (c *regexCache) compile(re string) (*regexp.Regexp, error) {
	c.mu.Lock()
	e, ok := c.entries[re]
	c.mu.Unlock()
	if ok {
		return e.rx, e.err
	}
	e = &compiledRegex{}
	e.rx, e.err = compileSubscription(re)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.compiles++
	if c.entries == nil {
		c.entries = map[string]*compiledRegex{}
	}
	if _, ok := c.entries[re]; !ok && len(c.entries) >= regexCacheMax {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[re] = e
	return e.rx, e.err
}

// compileSubscription compiles a subscribed regular expression. Kafka
// uses RE2/J and matches whole topic names; Go's regexp is RE2, anchored
// here to match whole names too. The regex is compiled alone first: the
// anchoring group would otherwise take unbalanced parentheses ("a)|(b"
// became "^(?:a)|(b)$", valid and anchored on one side only), which
// RE2/J refuses. A regex beyond RegexMaxBytes is not compiled.
func compileSubscription(re string) (*regexp.Regexp, error) {
	if len(re) > RegexMaxBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(re), RegexMaxBytes)
	}
	if _, err := regexp.Compile(re); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + re + ")$")
}

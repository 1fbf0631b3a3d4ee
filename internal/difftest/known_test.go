package difftest

import (
	"regexp"
	"strings"
)

// knownDifference is a difference written down in README.md: ringlog
// answers differently on purpose, or the fix waits. It is matched by test,
// step label ("*": any step of the test) and path, where [*] stands for any
// index or key. A known difference that a test no longer shows fails the
// test, so the list stays true.
type knownDifference struct {
	test, step, path string
	ref              string // the row of README.md's table: D1, D2, ...
	re               *regexp.Regexp
}

var known = func() []knownDifference {
	var k []knownDifference
	add := func(ref, test, step string, paths ...string) {
		for _, p := range paths {
			k = append(k, knownDifference{test: test, step: step, path: p, ref: ref})
		}
	}
	// The produce, fetch and offset surface.
	add("D10", "TestProduce", "unknown codec", "Topics[*].Partitions[*].ErrorCode")
	add("D11", "TestProduce", "timestamp too far ahead", "Topics[*].Partitions[*].ErrorRecords[*]")
	add("D12", "TestProduce", "acks -1, min.insync.replicas 2", "Topics[*].Partitions[*].ErrorCode", "Topics[*].Partitions[*].BaseOffset")
	add("D13", "TestProduce", "transactional id",
		"Topics[*].Partitions[*].ErrorCode", "Topics[*].Partitions[*].BaseOffset", "Topics[*].Partitions[*].LogStartOffset")
	add("D16", "TestMetadata", "auto-create", "Topics[*].ErrorCode", "Topics[*].TopicID", "Topics[*].Partitions[*]")

	for i := range k {
		k[i].re = regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(k[i].path), `\[\*\]`, `\[[^\]]*\]`) + "$")
	}
	return k
}()

func lookupKnown(test, step, path string) *knownDifference {
	for i := range known {
		kd := &known[i]
		if kd.test == test && (kd.step == step || kd.step == "*") && kd.re.MatchString(path) {
			return kd
		}
	}
	return nil
}

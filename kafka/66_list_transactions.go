package kafka

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/txn"
	"ringlog/internal/acl"
)

// ListTransactions, v0 to v2 (KIP-664; v1 adds KIP-994's duration filter,
// v2 KIP-1152's transactional id pattern): the transactions of the
// partitions of __transaction_state this broker coordinates, filtered by
// state, producer id, duration and id.
//
// The pattern is a regular expression that must match the whole id. Kafka
// compiles it with RE2/J (Pattern.compile, then Matcher.matches), whose
// syntax is RE2's, as is Go's regexp: the same patterns compile, and an
// invalid one is INVALID_REGULAR_EXPRESSION with nothing else in the
// answer (Kafka throws, and the request's error response carries only the
// code). A coordinator not available or loading answers that first, as in
// Kafka. An empty or null pattern matches every id. A pattern above
// txnPatternMaxBytes cannot be a protocol string Kafka decodes: Kafka closes
// the connection, and so does ringlog.
//
// With an authorizer, only the ids the principal may DESCRIBE are listed.
//
// The pattern is compiled on the connection's goroutine (linear in its
// size, as for KIP-848 subscriptions) and matched off the coordinator's
// shards, on a goroutine of its own: Go's regexp is linear, but in the
// pattern's size times the id's.
func init() {
	register(api{key: kmsg.ListTransactions, min: 0, max: 2, async: handleListTransactions})
}

// txnPatternMaxBytes is the longest transactional id pattern: a protocol
// string holds at most 32,767 bytes.
const txnPatternMaxBytes = 32767

func handleListTransactions(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	var pattern *regexp.Regexp
	var patternErr error
	if p := req.TransactionalIDPattern; req.Version >= 2 && p != nil && *p != "" {
		if len(*p) > txnPatternMaxBytes {
			cx.noReply()
			cx.c.Close()
			return
		}
		pattern, patternErr = compileWhole(*p)
	}
	f := txn.ListFilter{States: req.StateFilters, ProducerIDs: req.ProducerIDFilters, DurationMs: -1}
	if req.Version >= 1 {
		f.DurationMs = req.DurationFilterMillis
	}
	s.cfg.Txns.List(f, func(r *kmsg.ListTransactionsResponse) {
		r.SetVersion(req.Version)
		if s.cfg.Authorizer != nil && r.ErrorCode == 0 {
			// Only the ids the principal may DESCRIBE, as Kafka.
			kept := r.TransactionStates[:0]
			for _, t := range r.TransactionStates {
				if s.authorize(cx, acl.OpDescribe, acl.ResourceTransactionalID, t.TransactionalID) {
					kept = append(kept, t)
				}
			}
			r.TransactionStates = kept
		}
		switch {
		case r.ErrorCode != 0:
		case patternErr != nil:
			r = req.ResponseKind().(*kmsg.ListTransactionsResponse)
			r.ErrorCode = kerr.InvalidRegularExpression.Code
		case pattern != nil:
			go s.run(cx, func() {
				kept := r.TransactionStates[:0]
				for _, t := range r.TransactionStates {
					if pattern.MatchString(t.TransactionalID) {
						kept = append(kept, t)
					}
				}
				r.TransactionStates = kept
				cx.reply(r)
			})
			return
		}
		cx.reply(r)
	})
}

// compileWhole compiles a regular expression that must match a whole
// string, as Java's Matcher.matches asks. The pattern is compiled alone
// first: wrapped, an unbalanced one such as `a)|(b` would compile.
func compileWhole(p string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(p); err != nil {
		return nil, err
	}
	return regexp.Compile(`^(?:` + p + `)$`)
}

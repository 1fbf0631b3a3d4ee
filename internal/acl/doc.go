// Package acl is Kafka's access control model as ringlog enforces it:
// bindings (a resource pattern and an access control entry), the filters
// that DescribeAcls and DeleteAcls match them with, and the authorizer's
// decision, with the semantics of Kafka's StandardAuthorizer (KIP-11,
// KIP-290 for prefixed patterns, KIP-430 for authorized operations).
// It is pure: no I/O, no goroutines; the metadata quorum stores the
// bindings (replication/controller) and the kafka package asks a Set.
//
// A decision, for a principal connecting from a host, on an operation on
// a resource (type and name):
//
//  1. a super user (super.users) is allowed everything;
//  2. the bindings whose pattern matches the resource are found: LITERAL
//     with the resource's name, LITERAL "*" (every resource of the type),
//     PREFIXED with a prefix of the name;
//  3. of those, the ones whose principal is the caller's or "User:*" and
//     whose host is the caller's or "*" apply; a DENY that applies to the
//     operation (or to ALL) denies: DENY wins over ALLOW;
//  4. otherwise an ALLOW that applies allows. An ALLOW of READ, WRITE,
//     DELETE or ALTER also allows DESCRIBE, and of ALTER_CONFIGS allows
//     DESCRIBE_CONFIGS (implied operations); a DENY implies nothing;
//  5. otherwise, when no binding at all matched the resource's pattern
//     (of any principal), allow.everyone.if.no.acl.found decides;
//     otherwise the answer is no.
//
// Concurrency: a Set is immutable once built and may be read by any
// goroutine; an Authorizer swaps its Set atomically. A Cache belongs to
// one connection (one goroutine at a time).
//
// Non-obvious invariants:
//   - A Set's lookups allocate nothing: resource names are looked up with
//     substrings of the caller's name, never with built strings.
//   - Filters match as Kafka's ResourcePatternFilter does: MATCH with a
//     name finds the literal, the wildcard and every prefixed pattern that
//     would apply to a resource of that name; ANY with a name finds
//     patterns of exactly that name, of every pattern type.
package acl

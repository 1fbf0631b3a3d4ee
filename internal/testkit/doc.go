// Package testkit holds what ringlog's tests share and used to copy: the
// broker binary built once per test binary, free addresses on 127.0.0.1,
// and waits with a deadline. It imports no ringlog package, so that any
// package's tests (bench's, which measure the binary from outside, among
// them) may use it. testkit/testbroker starts a broker in the test's
// process. Only test files import either.
package testkit

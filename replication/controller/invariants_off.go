//go:build !invariants

package controller

// checkInvariants runs checkImage after every applied command when the
// package is built with -tags invariants; the state machine tests call
// checkImage themselves.
const checkInvariants = false

//go:build invariants

package controller

const checkInvariants = true

//go:build !linux

package ioring

import "time"

// Owner exists only on Linux; elsewhere no owner can be created and the
// layers keep their own loops.
type Owner struct{}

// OwnerGroup exists only on Linux.
type OwnerGroup struct{}

// OwnerStats counts an owner's wakes.
type OwnerStats struct{ Turns, Waits, BellsSent, BellsReceived, EventfdWakes, BellsFailed, DiskSyncs int64 }

// ProbeOwner reports why an Owner cannot be used: io_uring is Linux-only.
func ProbeOwner() string { return "io_uring exists only on Linux" }

// NewOwnerGroup returns an empty group.
func NewOwnerGroup() *OwnerGroup { return &OwnerGroup{} }

// NewOwner fails: io_uring is Linux-only.
func (g *OwnerGroup) NewOwner() (*Owner, error) { return nil, ErrUnavailable }

// Close does nothing.
func (g *OwnerGroup) Close() error { return nil }

// Close does nothing.
func (o *Owner) Close() {}

// Post fails: there is no owner.
func (o *Owner) Post(func()) error { return ErrClosed }

// Wake does nothing.
func (o *Owner) Wake() {}

// KeepP does nothing: there is no ring to wait in.
func (o *Owner) KeepP() {}

// Turn fails: there is no owner.
func (o *Owner) Turn(time.Duration) error { return ErrUnavailable }

// TurnIdle fails: there is no owner.
func (o *Owner) TurnIdle(time.Duration) error { return ErrUnavailable }

// AddHook does nothing.
func (o *Owner) AddHook(func(), func() bool) func() { return func() {} }

// Stats is zero.
func (o *Owner) Stats() OwnerStats { return OwnerStats{} }

// Current is false: there is no owner.
func (o *Owner) Current() bool { return false }

// OnClose does nothing.
func (o *Owner) OnClose(func()) func() { return func() {} }

// Poll fails: there is no owner.
func (o *Owner) Poll(time.Duration) error { return ErrUnavailable }

// Current is nil: there is no owner.
func (g *OwnerGroup) Current() *Owner { return nil }

// Err is nil: there is no ring.
func (o *Owner) Err() error { return nil }

// DiskIO fails: there is no owner.
func (o *Owner) DiskIO(Config) (IO, error) { return nil, ErrUnavailable }

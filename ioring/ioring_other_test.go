//go:build !linux

package ioring

import "testing"

func testPlatformErrors(t *testing.T, io IO) {}

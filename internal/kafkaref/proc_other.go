//go:build !linux

package kafkaref

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

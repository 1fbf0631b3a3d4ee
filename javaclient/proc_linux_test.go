package javaclient

import "syscall"

// sysProcAttr has the kernel kill a child (a broker, a JVM) when the test
// binary ends, so that a test killed by its timeout leaves none behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

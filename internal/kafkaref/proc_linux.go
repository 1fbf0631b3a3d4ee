package kafkaref

import "syscall"

// sysProcAttr has the kernel kill a node when the thread that started it
// ends, which for a Go program means when the process ends (the runtime
// ends a thread only under a goroutine that locked it and returned): a
// test binary killed by its timeout leaves no JVM behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

package mcpvisor

import "os"

// killPID kills the process pid (SIGKILL on Unix, TerminateProcess on
// Windows).
func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

package stdio

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
)

// pfExiting is the kernel's PF_EXITING task flag: the task has begun to
// exit (it is set before the task's files, its pipes among them, are
// closed).
const pfExiting = 0x4

// exitPending reports whether the process pid is on its way out: the
// kernel has begun its exit, it is a zombie, or it is gone. Its exit
// status is then sure to come, however loaded the machine.
func exitPending(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	// pid (comm) state ppid pgrp session tty_nr tpgid flags ...; comm
	// may hold spaces and parentheses, so count from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 {
		return false
	}
	if s := string(f[0]); s == "Z" || s == "X" || s == "x" {
		return true
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&pfExiting != 0
}

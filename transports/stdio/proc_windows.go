//go:build windows

package stdio

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/mcpvisor/mcpvisor/transports"
)

// newCommand builds the server's command the way a Windows user expects
// it to run: the program is looked up with the server's own PATH and
// PATHEXT (so "npx" finds npx.cmd, the usual failure of an .mcp.json
// written on Linux or macOS), a batch file runs through cmd.exe from the
// system folder with arguments it cannot misread (batchCommandLine), and
// the process starts suspended, without a console window, so that contain
// can put it in its job before it runs a single instruction.
func newCommand(cfg transports.Config, env []string) (*exec.Cmd, error) {
	path, err := lookWindowsCommand(cfg.Command, env, func(p string) bool {
		if !winIsAbs(p) && cfg.Cwd != "" {
			p = filepath.Join(cfg.Cwd, p)
		}
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir()
	})
	if err != nil {
		return nil, err
	}
	attr := &syscall.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED | windows.CREATE_NO_WINDOW}
	cmd := &exec.Cmd{Path: path, Args: append([]string{cfg.Command}, cfg.Args...), SysProcAttr: attr}
	if isBatchFile(path) {
		sys, err := windows.GetSystemDirectory()
		if err != nil {
			return nil, fmt.Errorf("finding cmd.exe: %w", err)
		}
		cmdExe := filepath.Join(sys, "cmd.exe")
		line, err := batchCommandLine(cmdExe, path, cfg.Args)
		if err != nil {
			return nil, &exec.Error{Name: cfg.Command, Err: err}
		}
		cmd.Path, cmd.Args, attr.CmdLine = cmdExe, []string{cmdExe}, line
	}
	return cmd, nil
}

// processTree is the Job Object that holds the server and everything it
// starts. The job is created with kill-on-close and only this process
// holds its handle, so when the supervisor exits, however it exits, the
// system closes the handle and ends every process in the job; no process
// in it may break away.
type processTree struct {
	job windows.Handle
}

// contain creates the server's job, assigns the suspended server to it
// and lets it run. On failure the server has not run and the caller
// kills it.
func contain(cmd *exec.Cmd) (processTree, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return processTree{}, fmt.Errorf("creating a job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return processTree{}, fmt.Errorf("setting kill-on-close on the job: %w", err)
	}
	pid := uint32(cmd.Process.Pid)
	proc, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		windows.CloseHandle(job)
		return processTree{}, fmt.Errorf("opening the server process: %w", err)
	}
	err = windows.AssignProcessToJobObject(job, proc)
	windows.CloseHandle(proc)
	if err != nil {
		windows.CloseHandle(job)
		return processTree{}, fmt.Errorf("putting the server in its job: %w", err)
	}
	if err := resumeProcess(pid); err != nil {
		windows.TerminateJobObject(job, 1)
		windows.CloseHandle(job)
		return processTree{}, err
	}
	return processTree{job: job}, nil
}

// resumeProcess resumes the threads of a process started suspended (its
// one main thread; os/exec closes the handle CreateProcess returned).
func resumeProcess(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("listing the server's threads: %w", err)
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	resumed := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return fmt.Errorf("opening the server's main thread: %w", err)
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return fmt.Errorf("resuming the server: %w", err)
		}
		resumed++
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return fmt.Errorf("listing the server's threads: %w", err)
	}
	if resumed == 0 {
		return errors.New("the server process has no thread to resume")
	}
	return nil
}

// signal ends every process in the job: Windows has no SIGTERM for a
// console-less process, so the ladder's gentle step is closing stdin and
// both later steps terminate the job.
func (t processTree) signal(syscall.Signal) {
	if t.job != 0 {
		_ = windows.TerminateJobObject(t.job, 1)
	}
}

// alive reports whether any process of the job remains.
func (t processTree) alive() bool {
	if t.job == 0 {
		return false
	}
	var info jobAccounting
	if err := windows.QueryInformationJobObject(t.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		return false
	}
	return info.ActiveProcesses > 0
}

// release closes the job's handle; kill-on-close ends anything still in
// it.
func (t processTree) release() {
	if t.job != 0 {
		windows.CloseHandle(t.job)
	}
}

// writeOnce is Send's no-wait first attempt, which Windows pipes do not
// offer: Send writes the ordinary way (the parent's end is overlapped, so
// its deadline still interrupts a blocked write).
func writeOnce(syscall.RawConn, []byte) int { return 0 }

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, which
// x/sys/windows does not define.
type jobAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

// Command rusage runs a command and writes its peak resident memory and CPU time
// to a file, for the chart tests' resource sizing.
//
// A test cannot read this from its own child: Go starts children with
// CLONE_VM|CLONE_VFORK, and Linux folds the parent's memory high-water mark into
// the child's ru_maxrss at exec, so a child of a large test process reports the test
// process's size. This small process in between keeps that floor at a few MiB.
//
//	rusage OUTFILE COMMAND [ARGS...]
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: rusage OUTFILE COMMAND [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(127)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru != nil {
		out, _ := json.Marshal(map[string]int64{
			"maxRSSBytes": ru.Maxrss * 1024, // KiB on Linux
			"cpuNanos":    ru.Utime.Nano() + ru.Stime.Nano(),
		})
		if werr := os.WriteFile(os.Args[1], out, 0o600); werr != nil {
			fmt.Fprintln(os.Stderr, "rusage:", werr)
		}
	}
	os.Exit(cmd.ProcessState.ExitCode())
}

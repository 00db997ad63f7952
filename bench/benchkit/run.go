// Package benchkit runs and measures the commands the benchmarks compare:
// wall time, the child's CPU seconds and peak RSS, for single commands and
// for two commands joined by a pipe, and prints the results as Markdown.
package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// Result is one measured command (or pipeline stage).
type Result struct {
	Name   string
	Wall   time.Duration
	CPU    time.Duration // user + system of the process and its waited-for children
	MaxRSS int64         // bytes, the largest of the process and its children (getrusage)
	OwnRSS int64         // bytes, the process's own peak (VmHWM), without its children's (pg_dump, pg_restore)
	// Machine is the CPU time every process on the machine (the servers'
	// backends included) spent while the command ran, from /proc/stat:
	// against Wall times the cores, how much of the machine the command
	// left idle. On a shared machine it counts the neighbours too.
	Machine time.Duration
	Size    int64 // output size when the benchmark records one
	Err     error
}

// Plus is r followed by o, as one result named r's: times added, the
// larger peak RSS.
func (r Result) Plus(o Result) Result {
	r.Wall += o.Wall
	r.CPU += o.CPU
	r.Machine += o.Machine
	r.MaxRSS = max(r.MaxRSS, o.MaxRSS)
	r.OwnRSS = max(r.OwnRSS, o.OwnRSS)
	return r
}

// Command is one program to run with arguments and extra environment.
type Command struct {
	Args []string
	Env  []string
	// Log, when set, is a file that the command's standard error is
	// appended to as well, so that a long run's progress and phase report
	// can be read after it (the error keeps its last line either way).
	Log string
}

// Cmd is a shorthand for Command{Args: args}.
func Cmd(args ...string) Command { return Command{Args: args} }

func (c Command) exec(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Args[0], c.Args[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	return cmd
}

// openLog opens c.Log for appending, or returns nil when there is none.
func (c Command) openLog() (*os.File, error) {
	if c.Log == "" {
		return nil, nil
	}
	f, err := os.OpenFile(c.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", c.Args[0], err)
	}
	return f, nil
}

// usage fills CPU and peak RSS from a finished process.
func usage(r *Result, ps *os.ProcessState) {
	if ps == nil {
		return
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		r.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		r.MaxRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
}

// Run runs one command to completion and measures it. Its stdout is
// discarded unless stdout is given.
func Run(ctx context.Context, name string, c Command, stdout io.Writer) Result {
	r := Result{Name: name}
	cmd := c.exec(ctx)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if log, err := c.openLog(); err != nil {
		return Result{Name: name, Err: err}
	} else if log != nil {
		defer log.Close()
		cmd.Stderr = io.MultiWriter(&stderr, log)
	}
	start, busy := time.Now(), machineBusy()
	err := cmd.Start()
	if err == nil {
		stop := sampleOwnRSS(cmd.Process.Pid, &r.OwnRSS)
		err = cmd.Wait()
		stop()
	}
	r.Wall = time.Since(start)
	r.Machine = machineBusy() - busy
	usage(&r, cmd.ProcessState)
	if err != nil {
		r.Err = fmt.Errorf("%s: %v: %s", name, err, lastLine(stderr.String()))
	}
	return r
}

// Pipeline runs a | b, measuring each side and the whole: the first result
// is the pipeline (wall of the whole, CPU summed, RSS the larger), then a
// and b.
func Pipeline(ctx context.Context, name string, a, b Command) (Result, Result, Result) {
	ra, rb := Result{Name: name + " (writer)"}, Result{Name: name + " (reader)"}
	ca, cb := a.exec(ctx), b.exec(ctx)
	pr, pw, err := os.Pipe()
	if err != nil {
		return Result{Name: name, Err: err}, ra, rb
	}
	var ea, eb bytes.Buffer
	ca.Stdout, ca.Stderr = pw, &ea
	cb.Stdin, cb.Stderr = pr, &eb
	for _, side := range []struct {
		c   Command
		cmd *exec.Cmd
		buf *bytes.Buffer
	}{{a, ca, &ea}, {b, cb, &eb}} {
		log, err := side.c.openLog()
		if err != nil {
			pr.Close()
			pw.Close()
			return Result{Name: name, Err: err}, ra, rb
		}
		if log != nil {
			defer log.Close()
			side.cmd.Stderr = io.MultiWriter(side.buf, log)
		}
	}
	start, busy := time.Now(), machineBusy()
	if err := ca.Start(); err != nil {
		return Result{Name: name, Err: err}, ra, rb
	}
	if err := cb.Start(); err != nil {
		ca.Process.Kill()
		ca.Wait()
		return Result{Name: name, Err: err}, ra, rb
	}
	pw.Close()
	pr.Close()
	stopA, stopB := sampleOwnRSS(ca.Process.Pid, &ra.OwnRSS), sampleOwnRSS(cb.Process.Pid, &rb.OwnRSS)
	errA := ca.Wait()
	stopA()
	ra.Wall = time.Since(start)
	errB := cb.Wait()
	stopB()
	rb.Wall = time.Since(start)
	usage(&ra, ca.ProcessState)
	usage(&rb, cb.ProcessState)
	whole := Result{Name: name, Wall: rb.Wall, CPU: ra.CPU + rb.CPU, MaxRSS: max(ra.MaxRSS, rb.MaxRSS), OwnRSS: max(ra.OwnRSS, rb.OwnRSS), Machine: machineBusy() - busy}
	if errA != nil {
		whole.Err = fmt.Errorf("%s: writer: %v: %s", name, errA, lastLine(ea.String()))
	} else if errB != nil {
		whole.Err = fmt.Errorf("%s: reader: %v: %s", name, errB, lastLine(eb.String()))
	}
	ra.Err, rb.Err = whole.Err, whole.Err
	return whole, ra, rb
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// StartCluster starts a throwaway cluster tuned the same for every tool
// measured on it: enough shared buffers and WAL that checkpoints do not
// dominate, nothing that only one tool would benefit from.
func StartCluster(ctx context.Context, binDir string) (*pgtest.Instance, error) {
	return StartClusterFor(ctx, binDir, 0)
}

// StartClusterFor is StartCluster for a database of up to tables tables:
// pg_dump locks every table it dumps in one transaction, so the shared
// lock table (max_locks_per_transaction × max_connections slots) must
// hold them all, as a DBA would configure a server pg_dump must work on
// (100,000 tables need 1,250 where the default is 64). Every tool runs on
// the same settings.
func StartClusterFor(ctx context.Context, binDir string, tables int) (*pgtest.Instance, error) {
	return pgtest.Start(ctx, pgtest.Options{BinDir: binDir, Settings: map[string]string{
		"shared_buffers":            "512MB",
		"max_wal_size":              "8GB",
		"checkpoint_timeout":        "30min",
		"max_connections":           strconv.Itoa(benchConnections),
		"max_locks_per_transaction": strconv.Itoa(LocksPerTransaction(tables)),
	}})
}

// benchConnections is the bench clusters' max_connections.
const benchConnections = 100

// LocksPerTransaction is the max_locks_per_transaction with which one
// transaction can lock tables tables on a bench cluster, with a quarter to
// spare (other sessions, TOAST tables): PostgreSQL's default of 64 when
// that is enough.
func LocksPerTransaction(tables int) int {
	return max(64, (tables*5/4+benchConnections-1)/benchConnections)
}

// sampleOwnRSS reads the peak resident set (VmHWM) of process pid every
// 100 ms into *peak until the returned stop is called (before the process
// is reaped, while /proc still has it): getrusage's peak is the largest of
// the process and every child it waited for, so a pgsprint dump would
// report pg_dump's. Zero where /proc is not there.
func sampleOwnRSS(pid int, peak *int64) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	read := func() {
		if v := vmHWM(pid); v > *peak {
			*peak = v
		}
	}
	go func() {
		defer close(finished)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-tk.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// vmHWM returns the VmHWM line of /proc/pid/status in bytes, or 0.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

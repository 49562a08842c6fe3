package chart

// The watchdog binary run as a process, as the chart's pods would run it: one
// `check` of the CronJob (with its rusage), or a long-running `run` of the
// Deployment (with its /metrics, /healthz and SIGTERM).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/check"
)

// chartWatchdog runs the watchdog binary as the chart's CronJob would: its args and
// environment as installed, its ServiceAccount's token, plus test-only flags (flags
// beat environment variables).
type chartWatchdog struct {
	t          *testing.T
	args       []string
	env        []string
	kubeconfig string
}

func cronJobWatchdog(t *testing.T, ns, kubeconfig string) *chartWatchdog {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cj, err := env.Client.BatchV1().CronJobs(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	return &chartWatchdog{t: t, args: c.Args, env: containerEnv(t, ns, c, fullname+"-manual"), kubeconfig: kubeconfig}
}

// runResult is one `watchdog check`.
type runResult struct {
	code           int
	report         check.Report
	stdout, stderr string
	// maxRSS and cpu are the process's peak resident memory and CPU time (user +
	// system), from its rusage: what the chart's resources are sized from.
	maxRSS int64
	cpu    time.Duration
}

func (w *chartWatchdog) check(flags ...string) runResult {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	usage := filepath.Join(w.t.TempDir(), "rusage.json")
	args := append(append(append([]string{usage, watchdogBin}, w.args...), "--kubeconfig", w.kubeconfig), flags...)
	cmd := exec.CommandContext(ctx, rusageBin, args...)
	cmd.Env = w.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := runResult{stdout: stdout.String(), stderr: stderr.String()}
	if raw, rerr := os.ReadFile(usage); rerr == nil {
		var ru struct{ MaxRSSBytes, CPUNanos int64 }
		if json.Unmarshal(raw, &ru) == nil {
			r.maxRSS, r.cpu = ru.MaxRSSBytes, time.Duration(ru.CPUNanos)
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("run watchdog: %v", err)
	}
	if r.code != 2 && stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &r.report); err != nil {
			w.t.Fatalf("stdout is not one JSON report (is run.output json?): %v\n%s", err, r.stdout)
		}
	}
	return r
}

func (r runResult) expect(t *testing.T, code int, verdict, action string) {
	t.Helper()
	if r.code != code || string(r.report.Verdict) != verdict || string(r.report.Action) != action {
		t.Fatalf("got exit %d %s/%s (%s), want exit %d %s/%s\nstdout:\n%s\nstderr:\n%s", r.code, r.report.Verdict, r.report.Action, r.report.Reason, code, verdict, action, r.stdout, r.stderr)
	}
}

// resourcesFit: the measured peak RSS of the runs fits the chart's memory request
// with room to spare under the limit.
func resourcesFit(t *testing.T, ns string, runs ...runResult) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cj, err := env.Client.BatchV1().CronJobs(ns).Get(ctx, fullname, metav1.GetOptions{})
	must(t, err)
	res := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources
	var peak int64
	var cpus []string
	for _, r := range runs {
		peak = max(peak, r.maxRSS)
		cpus = append(cpus, r.cpu.Round(time.Millisecond).String())
	}
	t.Logf("measured per check: peak RSS %.1f MiB, CPU %s; chart requests %s / limits %s memory",
		float64(peak)/(1<<20), strings.Join(cpus, ", "), res.Requests.Memory(), res.Limits.Memory())
	if peak == 0 {
		t.Fatal("no rusage measured")
	}
	if peak > res.Requests.Memory().Value() || 2*peak > res.Limits.Memory().Value() {
		t.Errorf("peak RSS %d bytes does not fit the request %s with 2x headroom under the limit %s", peak, res.Requests.Memory(), res.Limits.Memory())
	}
}

// runProc is a `watchdog run` process this test started.
type runProc struct {
	cmd     *exec.Cmd
	started time.Time
	addr    string
	stderr  *syncBuffer
	done    chan struct{}
	code    int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startRun(t *testing.T, args, environ []string, flags ...string) *runProc {
	t.Helper()
	p := &runProc{addr: testenv.FreeAddr(t), stderr: &syncBuffer{}, done: make(chan struct{})}
	full := append(append(append([]string{}, args...), "--metrics-addr", p.addr), flags...)
	p.cmd = exec.Command(watchdogBin, full...)
	p.cmd.Env = environ
	p.cmd.Stderr = p.stderr
	must(t, p.cmd.Start())
	p.started = time.Now()
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop sends SIGTERM to the process this test started and waits for it.
func (p *runProc) stop() int {
	select {
	case <-p.done:
		return p.code
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.code
}

func (p *runProc) age() time.Duration { return time.Since(p.started) }

// peakRSS reads VmHWM of the running process.
func (p *runProc) peakRSS(t *testing.T) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	must(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			must(t, err)
			return kib * 1024
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
	return 0
}

// get returns the status of GET path on the process's metrics address, 0 when it
// does not answer.
func (p *runProc) get(path string) int {
	code, _ := p.fetch(path)
	return code
}

// body returns the body of GET path, or the error.
func (p *runProc) body(path string) string {
	_, body := p.fetch(path)
	return body
}

func (p *runProc) fetch(path string) (int, string) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// passes is the process's agentenv_watchdog_passes_total, summed over its labels.
func (p *runProc) passes() int {
	var n int
	for _, line := range strings.Split(p.body("/metrics"), "\n") {
		if strings.HasPrefix(line, "agentenv_watchdog_passes_total") {
			if f := strings.Fields(line); len(f) == 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				n += int(v)
			}
		}
	}
	return n
}

// waitHolder waits for the election Lease to be held by someone ok accepts.
func waitHolder(t *testing.T, ns string, ok func(string) bool) string {
	t.Helper()
	var holder string
	waitFor(t, 30*time.Second, "the election Lease to be held", func() bool {
		ctx, cancel := testenv.Ctx()
		defer cancel()
		l, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false
		}
		holder = *l.Spec.HolderIdentity
		return ok(holder)
	})
	return holder
}

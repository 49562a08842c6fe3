package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/testenv"
)

// buildBinary builds cmd/watchdog the way the Dockerfile does (static, trimmed,
// stripped) into a temporary folder.
func buildBinary(tb testing.TB) string {
	tb.Helper()
	root, err := testenv.RepoRoot()
	must(tb, err)
	out := filepath.Join(tb.TempDir(), "watchdog")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/watchdog")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build watchdog: %v\n%s", err, b)
	}
	return out
}

// runStats are the costs of one process run.
type runStats struct {
	wall, cpu time.Duration
	maxRSS    int64 // bytes
}

// measure runs bin once directly, for wall and CPU time (from wait4), and once
// under /usr/bin/time for peak RSS: Go's os/exec starts processes with vfork, so a
// direct child's max RSS would include this test binary's memory, while
// /usr/bin/time forks a small child. (Timing under /usr/bin/time would add its own
// ~13 ms of CPU on this VM.)
func measure(tb testing.TB, bin string, args ...string) runStats {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + os.TempDir()}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		tb.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	stats := runStats{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}

	var stderr bytes.Buffer
	timed := exec.Command("/usr/bin/time", append([]string{"-f", "maxrss-kb=%M", bin}, args...)...)
	timed.Env, timed.Stderr = cmd.Env, &stderr
	if err := timed.Run(); err != nil {
		tb.Fatalf("/usr/bin/time %s: %v\n%s", bin, err, stderr.String())
	}
	m := regexp.MustCompile(`maxrss-kb=(\d+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		tb.Fatalf("no max RSS in /usr/bin/time output:\n%s", stderr.String())
	}
	kb, _ := strconv.ParseInt(m[1], 10, 64)
	stats.maxRSS = kb * 1024
	return stats
}

func summarize(stats []runStats) (wall, cpu time.Duration, rss float64, p90wall time.Duration) {
	walls := make([]time.Duration, len(stats))
	cpus := make([]time.Duration, len(stats))
	var maxRSS int64
	for i, s := range stats {
		walls[i], cpus[i] = s.wall, s.cpu
		if s.maxRSS > maxRSS {
			maxRSS = s.maxRSS
		}
	}
	sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
	sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
	return walls[len(walls)/2], cpus[len(cpus)/2], float64(maxRSS) / (1 << 20), walls[len(walls)*9/10]
}

// BenchmarkCheckHealthy measures one full `watchdog check` of a healthy pod (pods
// and EndpointSlices listed, metrics scraped, state read and written) as a process,
// the way a CronJob runs it, against the local control plane.
//
//	go test ./test/integration -run '^$' -bench CheckHealthy -benchtime 50x
func BenchmarkCheckHealthy(b *testing.B) {
	bin := buildBinary(b)
	s := newScenario(b, layout{serving: 3, page: fixture(b, "scheduler-metrics-healthy.txt")})
	args := []string{"check", "--kubeconfig", env.Kubeconfig, "--namespace", s.ns, "--metrics-port", strconv.Itoa(s.metrics.Port()), "--output", "json"}
	measure(b, bin, args...) // create the state ConfigMap: later runs update it
	stats := make([]runStats, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stats = append(stats, measure(b, bin, args...))
	}
	b.StopTimer()
	wall, cpu, rss, p90 := summarize(stats)
	b.ReportMetric(float64(wall.Microseconds())/1000, "wall-ms/run")
	b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/run")
	b.ReportMetric(rss, "peak-MiB")
	fmt.Printf("watchdog check, healthy pod, %d runs: median wall %s (p90 %s), median CPU %s, peak RSS %.1f MiB\n",
		len(stats), wall.Round(10*time.Microsecond), p90.Round(10*time.Microsecond), cpu.Round(10*time.Microsecond), rss)
}

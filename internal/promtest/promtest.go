// Package promtest runs a real Prometheus server on loopback over synthetic history:
// written as OpenMetrics, imported with `promtool tsdb create-blocks-from
// openmetrics`, queried through Prometheus' own HTTP API; or scraping a live target
// (StartScraping). hack/prometheus.sh provides both binaries.
package promtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binaries are the paths of prometheus and promtool: $PROMETHEUS and $PROMTOOL
// (as make test passes them), else what hack/prometheus.sh prints. Missing
// binaries are an error, never a skip: make test builds them.
func Binaries(repoRoot string) (prometheus, promtool string, err error) {
	find := func(envVar, flag string) (string, error) {
		if p := os.Getenv(envVar); p != "" {
			return p, nil
		}
		out, err := exec.Command("bash", filepath.Join(repoRoot, "hack", "prometheus.sh"), flag).Output() //nolint:gosec // the repository's own script
		if err != nil {
			return "", fmt.Errorf("%s is not set and hack/prometheus.sh %s failed (run hack/prometheus.sh, or make test): %w", envVar, flag, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if prometheus, err = find("PROMETHEUS", "--print"); err != nil {
		return "", "", err
	}
	if promtool, err = find("PROMTOOL", "--print-promtool"); err != nil {
		return "", "", err
	}
	return prometheus, promtool, nil
}

// Server is a Prometheus server on 127.0.0.1 serving imported history.
type Server struct {
	URL  string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan error
}

// Start imports history (OpenMetrics text) into a TSDB under dir with promtool and
// starts prometheus on it, returning once it is ready.
func Start(ctx context.Context, prometheus, promtool string, history []byte, dir string) (*Server, error) {
	input := filepath.Join(dir, "history.om")
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(input, history, 0o600); err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ictx, promtool, "tsdb", "create-blocks-from", "openmetrics", input, data).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("promtool tsdb create-blocks-from openmetrics: %w\n%s", err, tail(out))
	}
	return serve(ctx, prometheus, "global:\n  scrape_interval: 1m\n", dir, data)
}

// StartScraping starts prometheus with an empty TSDB under dir, scraping target
// (host:port, /metrics) every interval with honor_labels, as a Pushgateway is
// scraped, and returns once it is ready.
func StartScraping(ctx context.Context, prometheus, target string, interval time.Duration, dir string) (*Server, error) {
	config := fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n    static_configs:\n      - targets: [%q]\n",
		interval, interval, target)
	return serve(ctx, prometheus, config, dir, filepath.Join(dir, "data"))
}

// StartWithConfig starts prometheus with an empty TSDB under dir and the given
// configuration (YAML), and returns once it is ready.
func StartWithConfig(ctx context.Context, prometheus, config, dir string) (*Server, error) {
	return serve(ctx, prometheus, config, dir, filepath.Join(dir, "data"))
}

// serve starts prometheus with config on the TSDB at data.
func serve(ctx context.Context, prometheus, config, dir, data string) (*Server, error) {
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + addr, logs: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(prometheus, //nolint:gosec // the Prometheus binary the tests built
		"--config.file="+path,
		"--storage.tsdb.path="+data,
		// Imported history must outlive the server's retention check, whatever its age.
		"--storage.tsdb.retention.time=3650d",
		"--web.listen-address="+addr,
		"--log.level=warn")
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	if err := s.waitReady(ctx, time.Minute); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("%w\nprometheus log:\n%s", err, tail(s.logs.Bytes()))
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, within time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			return fmt.Errorf("prometheus exited before it was ready: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := client.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("prometheus on %s not ready within %s", s.URL, within)
}

// Logs is what the server printed.
func (s *Server) Logs() string { return string(s.logs.Bytes()) }

// Stop ends the server: SIGTERM, then SIGKILL after 10 s.
func (s *Server) Stop() error {
	if s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return err
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		return errors.Join(errors.New("prometheus did not stop within 10s of SIGTERM; killed"), <-s.done)
	}
}

// freeAddr picks a free loopback port. Another process could take it before
// prometheus binds it; the readiness wait then fails loudly.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func tail(b []byte) string {
	const n = 4000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
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

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// OpenMetrics builds an OpenMetrics exposition with timestamps: each family's
// series together, each series' samples in time order, as promtool's importer
// reads them.
type OpenMetrics struct {
	types  map[string]string
	series map[string]map[string][]point // family → label set → samples
}

type point struct {
	at time.Time
	v  float64
}

// Add appends a sample of family{labels} at t. typ is the family's OpenMetrics
// type (gauge, unknown, ...): a family keeps its first.
func (o *OpenMetrics) Add(family, typ string, labels map[string]string, t time.Time, v float64) {
	if o.types == nil {
		o.types, o.series = map[string]string{}, map[string]map[string][]point{}
	}
	if _, ok := o.types[family]; !ok {
		o.types[family], o.series[family] = typ, map[string][]point{}
	}
	key := labelString(labels)
	o.series[family][key] = append(o.series[family][key], point{t, v})
}

// Bytes is the exposition, ending in # EOF.
func (o *OpenMetrics) Bytes() []byte {
	var b bytes.Buffer
	families := make([]string, 0, len(o.types))
	for f := range o.types {
		families = append(families, f)
	}
	sort.Strings(families)
	for _, f := range families {
		fmt.Fprintf(&b, "# TYPE %s %s\n", f, o.types[f])
		keys := make([]string, 0, len(o.series[f]))
		for k := range o.series[f] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			pts := o.series[f][k]
			sort.SliceStable(pts, func(i, j int) bool { return pts[i].at.Before(pts[j].at) })
			for _, p := range pts {
				fmt.Fprintf(&b, "%s%s %s %s\n", f, k, strconv.FormatFloat(p.v, 'g', -1, 64), strconv.FormatFloat(float64(p.at.UnixMilli())/1000, 'f', 3, 64))
			}
		}
	}
	b.WriteString("# EOF\n")
	return b.Bytes()
}

func labelString(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + strconv.Quote(labels[n])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

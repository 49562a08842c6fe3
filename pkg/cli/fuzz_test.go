package cli_test

import (
	"bytes"
	"context"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/agentenv/watchdog/pkg/cli"
)

// FuzzFlags runs `watchdog check` with fuzzed values for a few flags of each kind
// (durations, ints, the selector, URLs, the HMAC key, the output format), given as
// flags or as WATCHDOG_<FLAG> environment variables. Nothing reaches the network:
//
//   - mode "offline": --kubeconfig /nonexistent, so a valid configuration stops at
//     loading the kubeconfig (exit 2) and an invalid one at validation (exit 2);
//
//   - mode "cancelled": a kubeconfig naming https://127.0.0.1:1, a context that is
//     already cancelled and --dry-run (no alert, no heartbeat), with the secret URLs
//     on a loopback host (https://127.0.0.9:9/<fuzzed path>), so a valid
//     configuration starts the pass, which fails at once (exit 1).
//
//     go test ./pkg/cli -run '^$' -fuzz '^FuzzFlags$' -fuzztime 10m -parallel 1
//
// Properties: no panic; the exit code is 0, 1 or 2; a value the flag's type or the
// documented rules reject exits 2 with a usage message (and in mode "cancelled" a
// configuration they accept exits 1); the values of --webhook-url,
// --slack-webhook-url, --webhook-secret and --heartbeat-url never appear on stdout
// or stderr.
func FuzzFlags(f *testing.F) {
	// The machine's own WATCHDOG_* variables must not change what a flag means here.
	for _, kv := range os.Environ() {
		if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(name, cli.EnvPrefix) {
			_ = os.Unsetenv(name)
			f.Cleanup(func() { _ = os.Setenv(name, value) })
		}
	}
	kubeconfig := filepath.Join(f.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(loopbackKubeconfig), 0o600); err != nil {
		f.Fatal(err)
	}

	// mode, timeout, scrape-timeout, wedged-for, max-restarts, metrics-port,
	// scheduler-selector, output, runbook-url, webhook-url, slack-webhook-url,
	// heartbeat-url, webhook-secret.
	f.Add(uint8(0), "", "", "", "", "", "", "", "", "", "", "", "")
	f.Add(uint8(1), "3m", "5s", "4m", "3", "9101", "app.kubernetes.io/name=agentenv-scheduler", "json", "https://runbooks.example/watchdog",
		"hooks/T000/B000/XXXXXXXXXXXXXXXX", "services/T000/B000/YYYYYYYYYYYY", "ping/0b8c6f2e-hb", "hmac-key-0123456789abcdef-of-32-bytes")
	f.Add(uint8(0), "3m", "5s", "4m", "3", "9101", "app=scheduler,tier in (a,b)", "text", "", "https://hooks.slack.example/services/T000/B000/XXXX", "https://hooks.example/wd?token=abcdef0123", "https://hc-ping.example/0b8c6f2e-hb", "hmac-key-0123456789abcdef-of-32-bytes")
	f.Add(uint8(0b10), "-1s", "0", "4x", "-1", "70000", "app=", "yaml", "ftp://runbooks", "http://hooks.example/not-loopback", "::not a url", "https://", "secret-without-webhook-url")
	f.Add(uint8(0b11110), "1h", "2h", "1ns", "0x10", "1e3", "!app", "json", "http://localhost:8080/rb", "%zz-not-escaped", "", "http://[::1]:9/hb", "")
	f.Add(uint8(0b1111111), "3m", "5s", "4m", "0", "65535", " ", "text", "", "a/b?c=d#e", "x", "", "k")

	f.Fuzz(func(t *testing.T, mode uint8, timeout, scrapeTimeout, wedgedFor, maxRestarts, metricsPort, selector, output, runbook, webhookURL, slackURL, heartbeatURL, webhookSecret string) {
		cancelledMode := mode&1 == 1
		if cancelledMode {
			// Secret URLs stay on a loopback host, whatever the fuzzer writes.
			for _, u := range []*string{&webhookURL, &slackURL, &heartbeatURL} {
				if *u != "" {
					*u = "https://127.0.0.9:9/" + *u
				}
			}
		}
		type setting struct {
			flag, value string
			env         bool
		}
		settings := []setting{
			{"timeout", timeout, mode&0b10 != 0}, {"scrape-timeout", scrapeTimeout, mode&0b10 != 0}, {"wedged-for", wedgedFor, mode&0b10 != 0},
			{"max-restarts", maxRestarts, mode&0b100 != 0}, {"metrics-port", metricsPort, mode&0b100 != 0},
			{"scheduler-selector", selector, mode&0b1000 != 0}, {"output", output, mode&0b1000 != 0}, {"runbook-url", runbook, mode&0b1000 != 0},
			{"webhook-url", webhookURL, mode&0b10000 != 0}, {"slack-webhook-url", slackURL, mode&0b10000 != 0},
			{"heartbeat-url", heartbeatURL, mode&0b10000 != 0}, {"webhook-secret", webhookSecret, mode&0b10000 != 0},
		}
		explicitEmpty := mode&0b100000 != 0 // pass "" values instead of leaving the flag out
		spaced := mode&0b1000000 != 0       // --flag value instead of --flag=value

		args := []string{"check"}
		if cancelledMode {
			args = append(args, "--kubeconfig", kubeconfig, "--dry-run")
		} else {
			// --dry-run: a configuration error pings <heartbeat-url>/fail, and the
			// fuzzed URL must not reach the network (a dry run sends nothing).
			args = append(args, "--kubeconfig=/nonexistent", "--dry-run")
		}
		given := map[string]string{}
		for _, s := range settings {
			if s.value == "" && !explicitEmpty {
				continue
			}
			if strings.ContainsRune(s.value, 0) && s.env {
				continue // an environment variable cannot hold NUL
			}
			given[s.flag] = s.value
			switch {
			case s.env:
				t.Setenv(cli.EnvName(s.flag), s.value)
			case spaced:
				args = append(args, "--"+s.flag, s.value)
			default:
				args = append(args, "--"+s.flag+"="+s.value)
			}
		}

		ctx := context.Background()
		if cancelledMode {
			c, cancel := context.WithCancel(ctx)
			cancel()
			ctx = c
		}
		var stdout, stderr bytes.Buffer
		code := cli.ExecuteContext(ctx, args, &stdout, &stderr)
		out := stdout.String() + stderr.String()

		if code != cli.ExitOK && code != cli.ExitFailed && code != cli.ExitUsage {
			t.Fatalf("exit %d\nargs %q\n%s", code, args, out)
		}
		if code == cli.ExitUsage && !strings.Contains(stderr.String(), "Run 'watchdog "+args[0]+" --help' for usage.") {
			t.Fatalf("exit 2 without a usage message\nargs %q\n%s", args, out)
		}
		if why := invalid(given); why != "" && code != cli.ExitUsage {
			t.Fatalf("%s, yet exit %d\nargs %q\n%s", why, code, args, out)
		} else if why == "" && cancelledMode && code != cli.ExitFailed {
			t.Fatalf("a valid configuration with a cancelled context must start the pass and fail (exit 1), got %d\nargs %q\n%s", code, args, out)
		}

		for _, flag := range []string{"webhook-url", "slack-webhook-url", "heartbeat-url", "webhook-secret"} {
			secret, ok := given[flag]
			if !ok || !distinctive(secret, flag, given) {
				continue
			}
			if strings.Contains(out, secret) {
				t.Fatalf("the value of --%s (%q) appears in the output\nargs %q\n%s", flag, secret, args, out)
			}
		}
	})
}

const loopbackKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: loopback
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
users:
- name: fuzz
  user:
    token: not-a-real-token
contexts:
- name: loopback
  context:
    cluster: loopback
    user: fuzz
current-context: loopback
`

// distinctive says whether a secret is long and unusual enough that finding it in
// the output can only mean it was echoed: not a word of the messages, not part of
// another flag's (legitimately echoed) value.
func distinctive(secret, flag string, given map[string]string) bool {
	if len(strings.TrimSpace(secret)) < 10 {
		return false
	}
	for other, v := range given {
		if other != flag && strings.Contains(v, secret) {
			return false
		}
	}
	return true
}

// invalid returns why the documented rules reject the given values, or "" when they
// accept them (the rules of README "Flags" for the fuzzed flags; the others keep
// their defaults, which are valid).
func invalid(given map[string]string) string {
	if s := given["webhook-secret"]; s != "" && len(s) < cli.MinOutboxKeyBytes {
		return "--webhook-secret is shorter than 32 bytes"
	}
	dur := func(flag string, def time.Duration) (time.Duration, string) {
		v, ok := given[flag]
		if !ok {
			return def, ""
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, "--" + flag + " is not a duration"
		}
		return d, ""
	}
	integer := func(flag string, def int) (int64, string) {
		v, ok := given[flag]
		if !ok {
			return int64(def), ""
		}
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil || n > math.MaxInt || n < math.MinInt {
			return 0, "--" + flag + " is not an integer"
		}
		return n, ""
	}
	timeout, why := dur("timeout", cli.DefaultTimeout)
	if why != "" {
		return why
	}
	scrapeTimeout, why := dur("scrape-timeout", 5*time.Second)
	if why != "" {
		return why
	}
	wedgedFor, why := dur("wedged-for", cli.DefaultWedgedFor)
	if why != "" {
		return why
	}
	maxRestarts, why := integer("max-restarts", 3)
	if why != "" {
		return why
	}
	port, why := integer("metrics-port", 9101)
	if why != "" {
		return why
	}
	switch {
	case timeout <= 0:
		return "--timeout is not positive"
	case scrapeTimeout <= 0:
		return "--scrape-timeout is not positive"
	case scrapeTimeout >= timeout:
		return "--scrape-timeout is not shorter than --timeout"
	case wedgedFor <= 0:
		return "--wedged-for is not positive"
	case maxRestarts < 0:
		return "--max-restarts is negative"
	case port < 1 || port > 65535:
		return "--metrics-port is not a port"
	}
	if sel, ok := given["scheduler-selector"]; ok {
		if _, err := labels.Parse(sel); err != nil || strings.TrimSpace(sel) == "" {
			return "--scheduler-selector is not a label selector"
		}
	}
	if out, ok := given["output"]; ok && out != "text" && out != "json" {
		return "--output is neither text nor json"
	}
	for _, flag := range []string{"slack-webhook-url", "webhook-url", "heartbeat-url"} {
		if v := given[flag]; v != "" && !acceptableURL(v) {
			return "--" + flag + " is not an https (or loopback http) URL"
		}
	}
	if v := given["runbook-url"]; v != "" && !linkURL(v) {
		return "--runbook-url is not an http(s) URL"
	}
	if given["webhook-secret"] != "" && given["webhook-url"] == "" {
		return "--webhook-secret without --webhook-url"
	}
	return ""
}

// acceptableURL: https with a host, or plain http to a loopback address.
func acceptableURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		host := u.Hostname()
		ip := net.ParseIP(host)
		return host == "localhost" || (ip != nil && ip.IsLoopback())
	}
	return false
}

// linkURL: a runbook link, http or https with a host (it carries no secret).
func linkURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Host != "" && (u.Scheme == "https" || u.Scheme == "http")
}

package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentenv/watchdog/pkg/decide"
)

// The restart budget is counted over the state's restart history, which keeps 100
// records for at most a week: a budget or window beyond that is refused (exit 2)
// rather than silently allowing more restarts than configured.
func TestBudgetBeyondTheKeptHistoryIsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--max-restarts", "100", "--restart-window", "168h"}, ""},
		{[]string{"--max-restarts", "101"}, "--max-restarts"},
		{[]string{"--restart-window", "336h"}, "--restart-window"},
	} {
		var o CheckOptions
		fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := o.Validate(DefaultTimeout)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: got %v, want a usage error naming %s", c.args, err, c.want)
		case c.want != "":
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Errorf("%v: %T is not a usage error", c.args, err)
			}
		}
	}
}

// A runbook link is not a secret: a plain-http wiki page is accepted, while the URLs
// that carry a secret stay https-only (loopback aside).
func TestRunbookURLMayBePlainHTTP(t *testing.T) {
	for _, c := range []struct {
		o    AlertOptions
		want string
	}{
		{AlertOptions{RunbookURL: "http://wiki.internal/runbook"}, ""},
		{AlertOptions{RunbookURL: "https://wiki.example/runbook#wedged"}, ""},
		{AlertOptions{RunbookURL: "ftp://wiki.internal/runbook"}, "--runbook-url"},
		{AlertOptions{RunbookURL: "http://"}, "--runbook-url"},
		{AlertOptions{HeartbeatURL: "http://hc.internal/ping/x"}, "--heartbeat-url"},
		{AlertOptions{WebhookURL: "http://hooks.internal/x"}, "--webhook-url"},
		{AlertOptions{SlackWebhookURL: "http://hooks.slack.com/services/x"}, "--slack-webhook-url"},
	} {
		// The flags' defaults, then the URL under test.
		var o AlertOptions
		fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		o.RunbookURL, o.HeartbeatURL, o.WebhookURL, o.SlackWebhookURL = c.o.RunbookURL, c.o.HeartbeatURL, c.o.WebhookURL, c.o.SlackWebhookURL
		err := o.Validate()
		if c.want == "" && err != nil {
			t.Errorf("%+v: %v", c.o, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: got %v, want an error naming %s", c.o, err, c.want)
		}
	}
}

// Every invalid flag is reported at once, in the order the flags are declared, and
// the same way on every run (the checks once ranged over maps and stopped at the
// first problem). Run it with -count=20.
func TestValidateReportsEveryInvalidFlagInDeclarationOrder(t *testing.T) {
	var stdout, stderr strings.Builder
	code := Execute([]string{"check", "--validate-only",
		"--namespace", "Bad_NS",
		"--deployment", "Agentenv_Scheduler",
		"--nodes-port", "0",
		"--metrics-port", "70000",
		"--wedged-for", "-1s",
		"--scrape-timeout", "0s",
		"--scrape-via", "tunnel",
		"--startup-grace", "-1s",
		"--restart-method", "kill",
		"--judge-pods", "owners",
		"--blind-after", "0",
		"--output", "xml",
	}, &stdout, &stderr)
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitUsage, stderr.String())
	}
	want := []string{
		`watchdog: --namespace "Bad_NS": `,
		`watchdog: --deployment "Agentenv_Scheduler": `,
		`watchdog: --metrics-port 70000: want 1-65535`,
		`watchdog: --scrape-timeout must be positive, got 0s`,
		`watchdog: --scrape-via "tunnel": want auto, direct or apiserver`,
		`watchdog: --nodes-port 0: want 1-65535`,
		`watchdog: --startup-grace must not be negative, got -1s`,
		`watchdog: --wedged-for must be positive, got -1s`,
		`watchdog: --restart-method "kill": want delete or rollout`,
		`watchdog: --judge-pods "owners": want deployment or selector`,
		`watchdog: --blind-after must be at least 1, got 0`,
		`watchdog: --output "xml": want text, json or yaml`,
		`Run 'watchdog check --help' for usage.`,
	}
	got := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), stderr.String())
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d: got %q, want it to start with %q", i+1, got[i], want[i])
		}
	}

	// One Validate alone returns one UsageError listing them all.
	o := CheckOptions{SchedulerSelector: "app=x", Deployment: "sched", MetricsPort: 0, NodesPort: 0, MetricsPath: "/metrics", ScrapeTimeout: time.Second,
		MetricsMaxBytes: 4096, NodesService: "nodes", SampleInterval: time.Second, ScrapeVia: "auto",
		Config: decide.Config{WedgedFor: time.Minute, RestartWindow: time.Hour, BackoffMax: time.Hour, RestartMethod: "delete",
			Selection: decide.Selection{JudgePods: "deployment", MaxPods: 10}}}
	err := o.Validate(DefaultTimeout)
	var ue *UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("%T is not a usage error: %v", err, err)
	}
	if want := "--metrics-port 0: want 1-65535\n--nodes-port 0: want 1-65535"; err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
}

// TestAlertLabels: --alert-labels takes key=value pairs that Alertmanager accepts
// as labels, never one the watchdog sets itself; "" is none.
func TestAlertLabels(t *testing.T) {
	for text, want := range map[string]string{
		"":                         "",
		"team=scheduling":          "team=scheduling",
		" tier = 1 , team=sched ,": "team=sched,tier=1",
		"routing_key=a=b":          "routing_key=a=b",
	} {
		var l AlertLabels
		if err := l.Set(text); err != nil || l.String() != want {
			t.Errorf("%q: %q, %v; want %q", text, l.String(), err, want)
		}
	}
	for text, want := range map[string]string{
		"team":                             "want key=value",
		"team=":                            "want key=value",
		"1team=x":                          "not a label name",
		"__name__=x":                       "not a label name",
		"te-am=x":                          "not a label name",
		"severity=low":                     "sets this label itself",
		"alertname=x":                      "sets this label itself",
		"a=1,a=2":                          "given twice",
		"team=" + strings.Repeat("x", 257): "longer than 256",
	} {
		var l AlertLabels
		if err := l.Set(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v, want %q", text, err, want)
		}
	}
}

// TestOutboxKeyIsAtLeast32Bytes: --outbox-key is an HMAC key; a short one can be
// guessed. Unset stays allowed (doctor says what that costs); set, it has at least
// 32 bytes, as the chart's generated one (43) does. The error never repeats it.
func TestOutboxKeyIsAtLeast32Bytes(t *testing.T) {
	for _, n := range []int{0, 1, 16, 31, 32, 43, 64} {
		var o EvidenceOptions
		fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
		o.AddFlags(fs)
		key := strings.Repeat("k", n)
		if err := fs.Parse([]string{"--outbox-key=" + key}); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		if ok := n == 0 || n >= 32; ok != (err == nil) {
			t.Errorf("a key of %d bytes: %v", n, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "--outbox-key") || !strings.Contains(err.Error(), "32 bytes") || (n > 8 && strings.Contains(err.Error(), key))) {
			t.Errorf("a key of %d bytes: %v, want it to name --outbox-key and 32 bytes, not the key", n, err)
		}
	}
}

// TestWebhookSecretIsAtLeast32Bytes: a short HMAC key is refused with the other
// flags' problems, naming the flag and the bound, never the key.
func TestWebhookSecretIsAtLeast32Bytes(t *testing.T) {
	for _, n := range []int{1, 19, 31, 32, 64} {
		key := strings.Repeat("s", n)
		var o AlertOptions
		fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse([]string{"--webhook-url=https://hooks.example.com/x", "--webhook-secret=" + key}); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		if ok := n >= 32; ok != (err == nil) {
			t.Errorf("a secret of %d bytes: %v", n, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "--webhook-secret has") || !strings.Contains(err.Error(), "32 bytes") || (n > 8 && strings.Contains(err.Error(), key))) {
			t.Errorf("a secret of %d bytes: %v, want it to name --webhook-secret and 32 bytes, not the key", n, err)
		}
	}
}

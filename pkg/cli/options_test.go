package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
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

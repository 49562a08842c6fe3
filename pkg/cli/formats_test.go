package cli

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/agentenv/watchdog/pkg/version"
)

// -o yaml wherever -o json exists, with the same document.
func TestYAMLWhereverJSON(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	n := 0
	for _, c := range commands(root) {
		f := c.Flags().Lookup("output")
		if f == nil || !strings.Contains(f.Usage, "json") {
			continue
		}
		n++
		if !strings.Contains(f.Usage, "yaml") {
			t.Errorf("%s -o: %q offers json and not yaml", c.CommandPath(), f.Usage)
		}
	}
	if n < 6 {
		t.Errorf("only %d commands have -o json: version, check, status, history, doctor, backtest at least", n)
	}
	var fromJSON, fromYAML version.Info
	var out strings.Builder
	if code := ExecuteContext(t.Context(), []string{"version", "-o", "json"}, &out, io.Discard); code != 0 {
		t.Fatalf("version -o json: exit %d", code)
	}
	if err := json.Unmarshal([]byte(out.String()), &fromJSON); err != nil || fromJSON != version.Get() {
		t.Errorf("version -o json: %q (%v), want %+v", out.String(), err, version.Get())
	}
	out.Reset()
	if code := ExecuteContext(t.Context(), []string{"version", "-o", "yaml"}, &out, io.Discard); code != 0 {
		t.Fatalf("version -o yaml: exit %d", code)
	}
	if err := yaml.Unmarshal([]byte(out.String()), &fromYAML); err != nil || fromYAML != fromJSON {
		t.Errorf("version -o yaml: %q (%v), want the JSON's %+v", out.String(), err, fromJSON)
	}
}

// history --since reads backtest --start's syntax: 7d, 36h, an RFC 3339 time.
func TestHistorySinceSyntax(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "config")
	// An API server that refuses connections: a valid --since gets as far as it.
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for since, want := range map[string]int{"7d": ExitFailed, "36h": ExitFailed, "2026-11-24T08:00:00Z": ExitFailed, "1w2d": ExitFailed, "1.5h": ExitFailed, "1ns": ExitFailed, "7 days": ExitUsage, "-5m": ExitUsage} {
		var stderr strings.Builder
		code := ExecuteContext(t.Context(), []string{"history", "--kubeconfig", kc, "--timeout", "2s", "--since", since}, io.Discard, &stderr)
		if code != want {
			t.Errorf("--since %s: exit %d, want %d\n%s", since, code, want, stderr.String())
		}
		if want == ExitUsage && !strings.Contains(stderr.String(), "--since") {
			t.Errorf("--since %s: %s", since, stderr.String())
		}
	}
}

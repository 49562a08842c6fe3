package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagValuesComplete: the shell completes the values of the word flags, the
// kubeconfig's contexts and namespaces (before: nothing, or file names).
func TestFlagValuesComplete(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts:
  - {name: prod-eu1, context: {cluster: c, user: u, namespace: agentenv-prod}}
  - {name: staging, context: {cluster: c, user: u}}
current-context: staging
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"check", "--restart-method", ""}, []string{"delete", "rollout"}},
		{[]string{"status", "-o", ""}, []string{"text", "json", "yaml"}},
		{[]string{"run", "--log-format", ""}, []string{"auto", "json", "console"}},
		{[]string{"doctor", "--context", ""}, []string{"prod-eu1", "staging"}},
		{[]string{"history", "-n", ""}, []string{"agentenv-prod", "agentenv-system"}},
	} {
		var stdout bytes.Buffer
		ExecuteContext(context.Background(), append([]string{"__complete"}, c.args...), &stdout, &bytes.Buffer{})
		got, _, _ := strings.Cut(stdout.String(), "\n:")
		if got != strings.Join(c.want, "\n") {
			t.Errorf("completing %v: %q, want %q", c.args, got, c.want)
		}
	}
}

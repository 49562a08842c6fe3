package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFlagValuesComplete: the shell completes the values of the word flags (before:
// nothing, or file names).
func TestFlagValuesComplete(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"check", "--restart-method", ""}, []string{"delete", "rollout"}},
		{[]string{"status", "-o", ""}, []string{"text", "json", "yaml"}},
		{[]string{"run", "--log-format", ""}, []string{"auto", "json", "console"}},
	} {
		var stdout bytes.Buffer
		ExecuteContext(context.Background(), append([]string{"__complete"}, c.args...), &stdout, &bytes.Buffer{})
		got, _, _ := strings.Cut(stdout.String(), "\n:")
		if got != strings.Join(c.want, "\n") {
			t.Errorf("completing %v: %q, want %q", c.args, got, c.want)
		}
	}
}

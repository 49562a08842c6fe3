package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLogDurationsHaveUnits: a duration in the log reads "2s" on the console and in
// JSON, not 2000 (milliseconds, with no unit); make demo prints these lines.
func TestLogDurationsHaveUnits(t *testing.T) {
	for format, want := range map[string]string{LogFormatConsole: "in=2s", LogFormatJSON: `"in":"2s"`} {
		var b bytes.Buffer
		log := newLogger(&ClusterOptions{LogFormat: format, LogLevel: "info"}, &b)
		log.Info().Dur("in", 2*time.Second).Msg("sampling again to confirm")
		if !strings.Contains(b.String(), want) {
			t.Errorf("--log-format %s: %q, want %s", format, b.String(), want)
		}
	}
}

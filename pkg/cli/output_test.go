package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// onTerminal runs write with a real terminal (a pseudo-terminal) as its writer and
// returns what the terminal shows.
func onTerminal(t *testing.T, write func(w io.Writer)) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	read := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, ptmx) // ends with an error once tty is closed
		read <- strings.ReplaceAll(b.String(), "\r\n", "\n")
	}()
	write(tty)
	tty.Close()
	return <-read
}

// TestOutputForMachinesAndPeople: JSON output is one line per object where a
// machine reads (a log pipeline keeps it whole) and indented on a terminal; logs
// are JSON lines for machines and console lines on a terminal, unless
// --log-format says.
func TestOutputForMachinesAndPeople(t *testing.T) {
	v := map[string]any{"verdict": "wedged", "targets": []string{"a", "b"}}
	json1 := &OutputOptions{Output: "json"}
	var pipe bytes.Buffer
	if err := json1.print(&pipe, v, nil); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(pipe.String(), "\n"); lines != 1 || !json.Valid(pipe.Bytes()) {
		t.Errorf("JSON to a pipe: %d lines, want one object on one line:\n%s", lines, pipe.String())
	}
	term := onTerminal(t, func(w io.Writer) {
		if err := json1.print(w, v, nil); err != nil {
			t.Error(err)
		}
	})
	if !strings.Contains(term, "\n  \"targets\": [\n") || !json.Valid([]byte(term)) {
		t.Errorf("JSON on a terminal is not indented:\n%s", term)
	}

	logLine := func(w io.Writer, format string) {
		log := newLogger(&ClusterOptions{LogLevel: "info", LogFormat: format}, w)
		log.Info().Str("pod", "p").Msg("decided")
	}
	for _, c := range []struct {
		format   string
		terminal bool
		json     bool
	}{
		{LogFormatAuto, false, true}, {LogFormatAuto, true, false},
		{LogFormatJSON, true, true}, {LogFormatConsole, false, false},
	} {
		var got string
		if c.terminal {
			got = onTerminal(t, func(w io.Writer) { logLine(w, c.format) })
		} else {
			var b bytes.Buffer
			logLine(&b, c.format)
			got = b.String()
		}
		isJSON := json.Valid([]byte(strings.TrimSpace(got)))
		if isJSON != c.json || !strings.Contains(got, "decided") {
			t.Errorf("--log-format %s, terminal %v: %q, want JSON %v", c.format, c.terminal, got, c.json)
		}
	}
	// --log-format console into a pipe (make demo | less), or with NO_COLOR: no ESC bytes.
	var piped bytes.Buffer
	logLine(&piped, LogFormatConsole)
	t.Setenv("NO_COLOR", "1")
	onTTY := onTerminal(t, func(w io.Writer) { logLine(w, LogFormatConsole) })
	for what, got := range map[string]string{"a pipe": piped.String(), "NO_COLOR on a terminal": onTTY} {
		if strings.ContainsRune(got, '\x1b') {
			t.Errorf("console log into %s has ESC bytes: %q", what, got)
		}
	}
}

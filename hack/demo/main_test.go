package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoColorWhenPipedOrAsked: `make demo | less`, a CI log and NO_COLOR get no ESC
// bytes (no-color.org); a terminal gets its styles.
func TestNoColorWhenPipedOrAsked(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if colorOn("", f) {
		t.Error("a file (not a terminal) gets colors")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if colorOn("", w) {
		t.Error("a pipe gets colors")
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if !colorOn("", tty) || colorOn("1", tty) {
			t.Error("a terminal: colors unless NO_COLOR is set")
		}
	}
	saved := color
	defer func() { color = saved }()
	color = false
	if s := styled("1", "== step"); strings.ContainsRune(s, '\x1b') {
		t.Errorf("styled without color: %q", s)
	}
}

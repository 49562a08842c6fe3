package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/deliver"
)

// TestVerifyChecksTheWebhookSignature: the demo's receiver accepts what the webhook sink
// signs (deliver.Sign), and refuses another body, another secret and a stale timestamp.
func TestVerifyChecksTheWebhookSignature(t *testing.T) {
	secret, body, now := []byte("0123456789abcdef0123456789abcdef"), []byte(`{"event":"wedged"}`), time.Now()
	signed := func(at time.Time, key []byte) *http.Request {
		r := httptest.NewRequest("POST", "/", nil)
		ts := strconv.FormatInt(at.Unix(), 10)
		r.Header.Set(deliver.HeaderTimestamp, ts)
		r.Header.Set(deliver.HeaderSignature, "sha256="+deliver.Sign(key, ts, body))
		return r
	}
	if !verify(secret, signed(now, secret), body, now) {
		t.Error("a signed alert does not verify")
	}
	if verify(secret, signed(now, secret), []byte(`{"event":"recovered"}`), now) {
		t.Error("another body verifies")
	}
	if verify(secret, signed(now, []byte("another secret of thirty-two bytes")), body, now) {
		t.Error("another secret verifies")
	}
	if verify(secret, signed(now.Add(-6*time.Minute), secret), body, now) {
		t.Error("a timestamp 6 minutes old verifies")
	}
}

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

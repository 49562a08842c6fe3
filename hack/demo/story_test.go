package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentenv/watchdog/pkg/events"
)

// evidenceText is `watchdog history --evidence` as the demo's restart saves it: a
// head, then the scheduler's last 200 log lines.
func evidenceText(seal string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "evidence 20261206T230237Z-agentenv-scheduler-7d9c4-x2k8p.json\n  seal: %s\n", seal)
	for i := range 14 {
		fmt.Fprintf(&b, "  head line %d\n", i)
	}
	b.WriteString("  log (last 200 line(s)):\n")
	log := strings.Split(strings.TrimSuffix(schedulerLog(), "\n"), "\n")
	for _, l := range log[len(log)-200:] {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// TestEvidenceCapped: the demo shows the evidence's head and the log from the watch's
// loss on, not 200 log lines, and says how much it cut.
func TestEvidenceCapped(t *testing.T) {
	full := evidenceText("✓ sealed")
	got := capLines(full, evidenceHead, evidenceTail)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != evidenceHead+evidenceTail+1 {
		t.Errorf("%d lines shown, want %d:\n%s", len(lines), evidenceHead+evidenceTail+1, got)
	}
	cut := strings.Count(full, "\n") - evidenceHead - evidenceTail
	if want := fmt.Sprintf("… %d lines (", cut); !strings.Contains(got, want) || !strings.Contains(got, " KiB) cut …") {
		t.Errorf("the cut is not counted (want %q ... KiB):\n%s", want, got)
	}
	for _, want := range []string{"seal: ✓", "log (last 200 line(s))", "client connection lost", "watch closed", "heartbeat rejected"} {
		if !strings.Contains(got, want) {
			t.Errorf("the capped evidence lacks %q:\n%s", want, got)
		}
	}
	if short := "a\nb\n"; capLines(short, evidenceHead, evidenceTail) != short {
		t.Errorf("a short text is changed: %q", capLines(short, evidenceHead, evidenceTail))
	}
}

// TestSealChecked: the happy path's evidence is sealed; the demo fails on any other
// seal, saying which.
func TestSealChecked(t *testing.T) {
	if err := checkSealed(evidenceText("✓ sealed with this watchdog's key (--outbox-key): saved as shown")); err != nil {
		t.Errorf("sealed: %v", err)
	}
	for _, seal := range []string{"✗ not sealed: saved by a run without --outbox-key", "✗ SEAL DOES NOT VERIFY"} {
		if err := checkSealed(evidenceText(seal)); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(seal, "✗ ")) {
			t.Errorf("seal %q: %v, want an error naming it", seal, err)
		}
	}
	if err := checkSealed("evidence x\n  restart of p\n"); err == nil {
		t.Error("no seal line: no error")
	}
}

// TestSummary: the closing summary says what happened, with a unit on every
// figure, and where to look next.
func TestSummary(t *testing.T) {
	s := &story{runs: 8, restarted: "sched-old", replacement: "sched-new", bundles: 2}
	s.countEvents([]corev1.Event{{Source: corev1.EventSource{Component: events.Component}}, {Source: corev1.EventSource{Component: "kubelet"}}, {Source: corev1.EventSource{Component: events.Component}}})
	for _, e := range []string{"wedged", "would-restart", "restarted", "recovered"} {
		s.alert(e, true)
	}
	var b strings.Builder
	s.writeSummary(&b, 52400*time.Millisecond)
	got := b.String()
	for _, want := range []string{
		"sched-old", "sched-new", "recovered",
		"the story took 52s; 8 watchdog commands; 1 restart", "4 alert(s) to the webhook, every signature valid: wedged, would-restart, restarted, recovered",
		"2 evidence bundle(s)", "2 Event(s) from the watchdog",
		"README.md", "watchdog doctor -n agentenv-system", "docs/alerts.md",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	// No figure as the log's fields were before their units (in=2000), nor a
	// duration as bare milliseconds or seconds (52400, 52.4).
	if bare := regexp.MustCompile(`=\d|\b\d{4,}\b|\b\d+\.\d+\b`).FindString(got); bare != "" {
		t.Errorf("a figure without its unit (%q):\n%s", bare, got)
	}
	s.alert("wedged", false)
	b.Reset()
	s.writeSummary(&b, time.Minute)
	if !strings.Contains(b.String(), "1 with a signature that did not verify") {
		t.Errorf("an invalid signature is not said:\n%s", b.String())
	}
}

package statetext

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// hostile is text a scheduler log line, a metric label value, an Event message or
// an editor of the state may hold: a line erased and rewritten, the clipboard set
// (OSC 52), a disguised link (OSC 8), a right-to-left override, a bell, a C1 CSI,
// a newline that forges a line of its own, and an invalid byte.
const hostile = "ok\x1b[2K\rreason: all healthy\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\\u202etxt.exe\u009b31m\nreason: forged\xff\ttabbed"

// rawControls returns the characters of out a terminal would act on rather than
// show: everything not printable except the renderer's own newlines and tabs.
func rawControls(out string) []string {
	var found []string
	for i, r := range out {
		if r == '\n' || r == '\t' {
			continue
		}
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			found = append(found, strings.ToValidUTF8(out[max(i-10, 0):min(i+10, len(out))], "?"))
		}
	}
	return found
}

// TestTextOutputEscapesTerminalControls: status, history and history --evidence
// print scheduler log lines, metric label values, reasons, last errors and Event
// messages. Every text renderer escapes what is not printable (tab kept), so none
// of it can erase or rewrite a line the operator reads, set the clipboard or
// disguise a link, and no value can start a line of its own.
func TestTextOutputEscapesTerminalControls(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	done := now.Add(-time.Minute)
	s := state.New()
	s.LastRun = &state.Run{At: now, Reason: hostile, Error: hostile, Verdict: state.Verdict(hostile), Outcome: state.RunOutcome(hostile)}
	s.Pods[hostile] = &state.Pod{Name: hostile, LastVerdict: state.Verdict(hostile), Episode: &state.OpenEpisode{Kind: state.Verdict(hostile), Evidence: state.Evidence(hostile)}}
	s.Restarts = []state.Restart{{Pod: hostile, UID: hostile, Method: hostile, Reason: hostile, Gates: hostile, Error: hostile, Ineffective: hostile, Bundle: hostile, ClaimedAt: done, DoneAt: &done, Outcome: state.RestartDone}}
	s.WouldRestarts = []state.WouldRestart{{Pod: hostile, UID: hostile, Reason: hostile, Gates: hostile, Bundle: hostile, At: done}}
	s.Backoff = &state.Backoff{}
	s.Alerts[hostile] = &state.Alert{Event: hostile, Pod: hostile}
	s.Outbox = []state.Pending{{ID: hostile, Event: hostile, Sinks: []string{hostile}, LastError: hostile}}
	s.Episodes = []state.Episode{{Pod: hostile, UID: hostile, Kind: state.Verdict(hostile), Outcome: state.EpisodeOutcome(hostile)}}

	var status bytes.Buffer
	if err := (Status{ConfigMap: "ns/" + hostile, ResourceVersion: hostile, Warning: hostile, State: s}).WriteText(&status, now); err != nil {
		t.Fatal(err)
	}
	var history bytes.Buffer
	entries := append(Entries(s), Entry{At: now, Kind: "event", Pod: hostile, What: hostile, Reason: hostile, Notes: []string{hostile}})
	if err := (History{Entries: entries, Notes: []string{hostile}}).WriteText(&history); err != nil {
		t.Fatal(err)
	}
	var bundle bytes.Buffer
	b := evidence.Bundle{
		Key: hostile, Pod: hostile, UID: hostile, Action: hostile, Verdict: state.Verdict(hostile), Evidence: state.Evidence(hostile), Reason: hostile,
		Gates:  []decide.Gate{{Name: hostile, Detail: hostile}},
		Sample: &scrape.Sample{Observed: map[string]int{hostile: 3}},
		Status: evidence.PodStatus{Phase: hostile, Controller: hostile, WaitingReason: hostile},
		Log:    hostile + "\n" + hostile + "\n", Warnings: []string{hostile},
	}
	if err := b.WriteText(&bundle); err != nil {
		t.Fatal(err)
	}
	b.Log, b.LogError = "", hostile
	if err := b.WriteText(&bundle); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"status": status.String(), "history": history.String(), "history --evidence": bundle.String()} {
		if raw := rawControls(out); len(raw) > 0 {
			t.Errorf("%s prints %d raw control character(s), e.g. around %q", name, len(raw), raw[0])
		}
		// A log line is a line of its own (indented under "log"); nothing else is.
		if strings.Contains(strings.ReplaceAll(out, "\n    reason: forged\\xff\ttabbed\n", "\n"), "\n    reason: forged") || strings.Contains(out, "\nreason: forged") || strings.Contains(out, "\n  reason: forged") {
			t.Errorf("%s: a value starts a line of its own:\n%s", name, out)
		}
		if !strings.Contains(out, `ok\x1b[2K\rreason: all healthy`) || !strings.Contains(out, "\ttabbed") {
			t.Errorf("%s does not show the escaped text (tab kept):\n%s", name, out)
		}
	}
}

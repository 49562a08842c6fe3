package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agentenv/watchdog/pkg/events"
)

// story is what the demo saw, for its closing summary.
type story struct {
	mu      sync.Mutex
	runs    int      // watchdog commands run
	alerts  []string // events the webhook receiver got, in order
	invalid int      // alerts whose signature did not verify
	// restarted and replacement are the scheduler pods before and after the restart.
	restarted, replacement string
	bundles, events        int // evidence bundles saved, Kubernetes Events the watchdog left
}

func (s *story) alert(event string, valid bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alerts = append(s.alerts, event)
	if !valid {
		s.invalid++
	}
}

// writeSummary is the demo's last word: what happened, its figures (each with its
// unit), and where to look next.
func (s *story) writeSummary(w io.Writer, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	signed := "every signature valid"
	if s.invalid > 0 {
		signed = fmt.Sprintf("%d with a signature that did not verify", s.invalid)
	}
	fmt.Fprintf(w, `what happened: scheduler pod %s was healthy; its discovery died (ready 3 → 0 nodes,
  heartbeats rejected); a dry run and a shadow run said they would restart it; with restarts on,
  the watchdog confirmed the wedge afresh and deleted the pod; the replacement %s was healthy
  once past its startup grace: recovered.
figures: the story took %s; %d watchdog commands; 1 restart; %d evidence bundle(s); %d Event(s) from the watchdog;
  %d alert(s) to the webhook, %s: %s.
next:
  README.md "Install, in shadow mode"   helm install on your cluster, a week in shadow mode first
  watchdog doctor -n agentenv-system   the preflight, against your cluster
  docs/alerts.md                        each alert, its evidence, where to route it
  docs/design.md                        how it decides, and why
`, s.restarted, s.replacement, took.Round(time.Second), s.runs, s.bundles, s.events, len(s.alerts), signed, strings.Join(s.alerts, ", "))
}

// countEvents counts the Events the watchdog left (on the node, the cluster's too).
func (s *story) countEvents(items []corev1.Event) {
	for _, e := range items {
		if e.Source.Component == events.Component {
			s.events++
		}
	}
}

// Caps of the evidence shown: its head (the seal, gates, metrics, the pod) and the
// log's last lines, from the watch's loss on; `watchdog history --evidence` prints it whole.
const evidenceHead, evidenceTail = 18, 9

// capLines keeps out's first head and last tail lines and says, between them, how
// many lines and bytes were cut.
func capLines(out string, head, tail int) string {
	lines := strings.SplitAfter(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) <= head+tail+1 {
		return out
	}
	cut := lines[head : len(lines)-tail]
	n := 0
	for _, l := range cut {
		n += len(l)
	}
	return strings.Join(lines[:head], "") + fmt.Sprintf("    … %d lines (%.1f KiB) cut …\n", len(cut), float64(n)/1024) +
		strings.Join(lines[len(lines)-tail:], "") + "\n"
}

// checkSealed fails unless the evidence says its seal verifies: the demo's happy
// path runs with a key (--key-secret's Secret, created by the first real pass).
func checkSealed(evidence string) error {
	for l := range strings.Lines(evidence) {
		if seal, ok := strings.CutPrefix(strings.TrimSpace(l), "seal: "); ok {
			if strings.HasPrefix(seal, "✓") {
				return nil
			}
			return fmt.Errorf("the evidence's seal does not verify: %s", strings.TrimSpace(seal))
		}
	}
	return errors.New("the evidence has no seal line")
}

// showEvidence prints, capped, the newest evidence bundle (the restart's: keys begin
// with their time; the shadow run's would-restart saved one too) and checks its seal.
func showEvidence(ctx context.Context, client kubernetes.Interface, s *story, capture func(args ...string) (string, error)) error {
	step("what the scheduler looked like just before the restart (watchdog history --evidence)")
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "agentenv-scheduler-watchdog-evidence", metav1.GetOptions{})
	if err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(cm.Data))
	if s.bundles = len(keys); len(keys) == 0 {
		return errors.New("no evidence bundle saved")
	}
	out, err := capture("history", "--evidence", keys[len(keys)-1])
	fmt.Print(capLines(out, evidenceHead, evidenceTail))
	if err != nil {
		return err
	}
	fmt.Printf("(the whole bundle: watchdog history -n %s --evidence %s; -o json for the raw one)\n", ns, keys[len(keys)-1])
	return checkSealed(out)
}

// Package alerttest holds the fixtures the tests of the alert policy (pkg/alert)
// and of the sinks (pkg/sink) share: one judged scheduler pod, a run's result
// over pods, a plan configuration, a webhook receiver's signature check.
package alerttest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// T0 is the fixtures' time.
var T0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// IntP points at v.
func IntP(v int) *int { return &v }

// PlanConfig is an alert policy.
func PlanConfig() alert.PlanConfig {
	return alert.PlanConfig{RealertInterval: time.Hour, BlindAfter: 3, WedgedFor: 4 * time.Minute}
}

// Source is a cluster prod-eu1's watchdog.
var Source = alert.Source{Cluster: "prod-eu1", Namespace: "agentenv-system", Version: "v1.2.3"}

// Target is one judged scheduler pod, bad for badFor (zero: not bad).
func Target(v state.Verdict, a state.Action, badFor time.Duration, now time.Time) decide.Target {
	t := decide.Target{
		Pod: "agentenv-scheduler-abc12", UID: "7f3c9a52-uid", Judged: true, Verdict: v, Action: a,
		Reason: fmt.Sprintf("%s: ready 0 of 3 expected", v), Ready: IntP(0), Expected: IntP(3),
	}
	if v == state.VerdictHealthy {
		t.Ready = IntP(3)
		t.Reason = "3 of 3 nodes ready"
	}
	if badFor > 0 || v == state.VerdictWedged || v == state.VerdictDegraded {
		since := now.Add(-badFor)
		t.BadSince, t.BadFor, t.Evidence = &since, state.Duration(badFor), state.EvidenceStrong
	}
	return t
}

// Result is the run's result over ts, as decide ranks verdicts and actions.
func Result(ts ...decide.Target) decide.Result {
	res := decide.Result{Verdict: state.VerdictHealthy, Action: state.ActionNone, Reason: "all judged pods healthy", Targets: ts}
	rank := map[state.Verdict]int{state.VerdictHealthy: 0, state.VerdictStarting: 1, state.VerdictNoNodes: 2, state.VerdictUnknown: 3, state.VerdictDegraded: 4, state.VerdictWedged: 5}
	arank := map[state.Action]int{state.ActionNone: 0, state.ActionWait: 1, state.ActionBlocked: 2, state.ActionRestart: 3}
	for _, t := range ts {
		if !t.Judged {
			continue
		}
		if rank[t.Verdict] > rank[res.Verdict] {
			res.Verdict, res.Reason = t.Verdict, t.Reason
		}
		if arank[t.Action] > arank[res.Action] {
			res.Action = t.Action
		}
	}
	return res
}

// Verify checks a webhook's X-Watchdog-Signature as a receiver should (docs/alerts.md): constant-time,
// the timestamp within maxSkew of now, computed independently of deliver.Sign.
func Verify(secret []byte, timestamp, signatureHeader string, body []byte, now time.Time, maxSkew time.Duration) bool {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || now.Sub(time.Unix(ts, 0)).Abs() > maxSkew {
		return false
	}
	got, err := hex.DecodeString(strings.TrimPrefix(signatureHeader, "sha256="))
	mac := hmac.New(sha256.New, secret)
	fmt.Fprintf(mac, "%s.", timestamp)
	mac.Write(body)
	return err == nil && hmac.Equal(got, mac.Sum(nil))
}

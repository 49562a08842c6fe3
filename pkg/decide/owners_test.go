package decide_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// With JudgePods JudgeDeployment (the CLI's default) only the
// pods whose owner chain, by UID, leads to the scheduler Deployment are judged.
// A canary or a debug pod sharing the scheduler's labels is listed as not judged:
// it neither turns the single-target gate on nor counts for --max-pods.

// canary is a pod of another Deployment ("agentenv-scheduler-canary") with the
// scheduler's labels; debug a bare pod with them.
func canary(name string) decide.Pod {
	p := schedPod(name, "uid-"+name, podtest.Sample(3, 0))
	p.ControllerName, p.ControllerUID = "agentenv-scheduler-canary-5d8f9", "rs-canary"
	return p
}

func debugPod(name string) decide.Pod {
	p := schedPod(name, "uid-"+name, podtest.Sample(3, 0))
	p.ControllerKind, p.ControllerName, p.ControllerUID = "", "", ""
	return p
}

// withOwnership is o as the observer reports it: a chain for each pod naming a
// ReplicaSet of the Deployment, verified unless its UID is in forged.
func withOwnership(o decide.Observation, forged ...string) decide.Observation {
	own := &decide.Ownership{Deployment: "agentenv-scheduler", Found: true, Chains: map[string]decide.OwnerChain{}}
	for _, p := range o.Pods {
		switch {
		case !decide.OwnedByName(p, own.Deployment):
		case slices.Contains(forged, p.UID):
			own.Chains[p.UID] = decide.OwnerChain{Detail: fmt.Sprintf("pod %s names ReplicaSet %s with uid %q, but ReplicaSet %s has uid %q", p.Name, p.ControllerName, p.ControllerUID, p.ControllerName, "rs-uid")}
		default:
			own.Chains[p.UID] = decide.OwnerChain{Verified: true, ReplicaSetUID: p.ControllerUID, Detail: "pod → ReplicaSet → Deployment"}
		}
	}
	o.Ownership = own
	return o
}

func ownedConfig() decide.Config {
	cfg := testConfig()
	cfg.JudgePods = decide.JudgeDeployment
	cfg.WedgedFor = 150 * time.Second
	cfg.MaxPods = 10
	return cfg
}

// TestOnlyTheDeploymentsPodsCount: --max-pods counts the Deployment's live pods,
// not every pod the selector matches; a pod that names the Deployment's
// ReplicaSet with another UID (a forgery) is not judged, with the link that
// failed, and is not a second target.
func TestOnlyTheDeploymentsPodsCount(t *testing.T) {
	cfg := ownedConfig()
	cfg.MaxPods = 2
	pods := []decide.Pod{schedPod("sched-a", "uid-a", podtest.Sample(0, 0))}
	for i := range 5 {
		pods = append(pods, canary(fmt.Sprintf("sched-canary-%d", i)), debugPod(fmt.Sprintf("sched-debug-%d", i)))
	}
	forged := schedPod("sched-forged", "uid-forged", podtest.Sample(3, 0))
	forged.ControllerUID = "0b5e55ed"
	pods = append(pods, forged)
	o := func(at time.Time) decide.Observation { return withOwnership(observe(at, 3, pods...), "uid-forged") }
	_, r := wedgedTwice(cfg, state.New(), o)
	if r.Action != state.ActionRestart {
		t.Fatalf("%s/%s: %s", r.Verdict, r.Action, r.Reason)
	}
	for _, tg := range r.Targets {
		if tg.Pod == "sched-forged" && (tg.Judged || !strings.Contains(tg.Reason, `names ReplicaSet agentenv-scheduler-7d9c4 with uid "0b5e55ed"`)) {
			t.Errorf("the forged pod: %+v", tg)
		}
	}
	// Judging every pod, the same pods are too many.
	cfg.JudgePods = decide.JudgeSelector
	if _, r := decide.Decide(o(t0), state.New(), cfg); r.Verdict != state.VerdictUnknown || !strings.Contains(r.Reason, "12 live pods match the selector, more than --max-pods 2") {
		t.Errorf("judging every pod: %s: %s", r.Verdict, r.Reason)
	}
	// More of the Deployment's own pods than --max-pods is still too many.
	cfg.JudgePods = decide.JudgeDeployment
	many := append(slices.Clone(pods), schedPod("sched-b", "uid-b", podtest.Sample(3, 0)), schedPod("sched-c", "uid-c", podtest.Sample(3, 0)))
	if _, r := decide.Decide(withOwnership(observe(t0, 3, many...), "uid-forged"), state.New(), cfg); r.Verdict != state.VerdictUnknown || !strings.Contains(r.Reason, "3 live pods of Deployment agentenv-scheduler, more than --max-pods 2") {
		t.Errorf("three of the Deployment's pods: %s: %s", r.Verdict, r.Reason)
	}
}

// TestNoDeploymentNoJudging: when the Deployment's pods cannot be told (not
// read, unreadable, no such Deployment, none of its pods live), nobody is judged:
// the verdict is unknown, nothing is restarted, and the reason says what to set.
func TestNoDeploymentNoJudging(t *testing.T) {
	cfg := ownedConfig()
	wedged := schedPod("sched-a", "uid-a", podtest.Sample(0, 0))
	for _, tc := range []struct {
		name      string
		ownership *decide.Ownership
		pods      []decide.Pod
		want      string
	}{
		{"not read", nil, []decide.Pod{wedged}, "the scheduler Deployment's pods were not read"},
		{"unreadable", &decide.Ownership{Deployment: "agentenv-scheduler", Err: errors.New("deployments.apps is forbidden")}, []decide.Pod{wedged}, "cannot tell the pods of Deployment agentenv-scheduler: deployments.apps is forbidden"},
		{"no such Deployment", &decide.Ownership{Deployment: "agentenv-scheduler"}, []decide.Pod{wedged}, "Deployment agentenv-scheduler not found: no pod is judged (set --deployment to the scheduler's, or --judge-pods selector"},
		{"only others", &decide.Ownership{Deployment: "agentenv-scheduler", Found: true}, []decide.Pod{canary("sched-canary")}, "no live pod of Deployment agentenv-scheduler matches the selector (1 other live pod does, not judged)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observe(t0, 3, tc.pods...)
			o.Ownership = tc.ownership
			_, r := wedgedTwice(cfg, state.New(), func(at time.Time) decide.Observation { o.At, o.RunStart = at, at; return o })
			if r.Verdict != state.VerdictUnknown || r.Action != state.ActionNone || !strings.Contains(r.Reason, tc.want) {
				t.Errorf("%s/%s: %s\nwant the reason to say %q", r.Verdict, r.Action, r.Reason, tc.want)
			}
			for _, tg := range r.Targets {
				if tg.Judged {
					t.Errorf("judged %+v", tg)
				}
			}
		})
	}
}

// A sample that could not be taken (the pod list refused: Unseen) is judged as
// failed samples of the last observation's pods, and those pods are the
// Deployment's as that observation read them: the wedge being confirmed stays
// wedged (a failed sample), never "the Deployment's pods were not read"
// (unknown, as before this fix: TestFailingSamplesStillPageAndRestart caught it).
func TestAnUnseenSampleKeepsTheDeploymentsPods(t *testing.T) {
	cfg := ownedConfig()
	o := withOwnership(observe(t0, 3, schedPod("sched-a", "uid-a", podtest.Sample(0, 0)), canary("sched-canary")))
	s, r := decide.Decide(o, state.New(), cfg)
	if r.Verdict != state.VerdictWedged {
		t.Fatalf("first sample: %s: %s", r.Verdict, r.Reason)
	}
	_, r = decide.Decide(decide.Unseen(o, t0.Add(15*time.Second), errors.New("pods is forbidden")), s, cfg)
	if r.Verdict != state.VerdictWedged || strings.Contains(r.Reason, "not read") || len(r.Targets) != 2 || !r.Targets[0].Judged || r.Targets[0].Pod != "sched-a" {
		t.Errorf("an unseen sample: %s: %s, targets %+v", r.Verdict, r.Reason, r.Targets)
	}
}

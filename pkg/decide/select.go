package decide

import (
	"fmt"
	"strings"
	"time"
)

// Live reports a pod that could be judged: neither terminating nor finished
// (Evicted, say, which stays listed until garbage-collected).
func Live(p Pod) bool {
	return !p.Terminating && p.Phase != "Failed" && p.Phase != "Succeeded"
}

// Selection says which of the pods matching the selector a run judges: what the
// observer reads (the Lease, the Deployment's owner chains) and scrapes.
type Selection struct {
	JudgePods   JudgePods // the zero value is JudgeSelector, the CLI's default JudgeDeployment
	LeaderLease string
	MaxPods     int
}

// Judged is which of obs's pods a run judges (and the observer scrapes), why each
// other is not (by UID, as names repeat), and the run's problem when none is.
func Judged(obs Observation, cfg Selection) (judged []Pod, notJudged map[string]string, problem string) {
	notJudged = map[string]string{}
	var live []Pod
	for _, p := range obs.Pods {
		switch {
		case p.Terminating:
			notJudged[p.UID] = "terminating"
		case !Live(p):
			notJudged[p.UID] = "finished (pod phase " + p.Phase + ")"
		default:
			live = append(live, p)
		}
	}
	if len(obs.Pods) == 0 {
		return nil, notJudged, "no scheduler pod matches the selector"
	}
	if len(live) == 0 {
		return nil, notJudged, "every scheduler pod is terminating or finished"
	}
	if cfg.JudgePods == JudgeDeployment {
		if live, problem = deploymentsPods(obs.Ownership, live, notJudged); problem != "" {
			return nil, notJudged, problem
		}
	}
	if cfg.MaxPods > 0 && len(live) > cfg.MaxPods {
		// A selector gone wide must not turn into a scrape of each pod.
		why := fmt.Sprintf("%s: %d live pods match the selector, more than --max-pods %d; none is scraped or judged (check --scheduler-selector)",
			tooManyPrefix, len(live), cfg.MaxPods)
		if cfg.JudgePods == JudgeDeployment {
			why = fmt.Sprintf("%s: %d live pods of Deployment %s, more than --max-pods %d; none is scraped or judged",
				tooManyPrefix, len(live), obs.Ownership.Deployment, cfg.MaxPods)
		}
		return nil, notJudged, noneJudged(live, notJudged, why)
	}
	if cfg.LeaderLease == "" {
		return live, notJudged, ""
	}
	if obs.Leader == nil || obs.Leader.Err != nil {
		why := "leader Lease not read"
		if obs.Leader != nil {
			why = fmt.Sprintf("cannot read leader Lease %s: %v", cfg.LeaderLease, obs.Leader.Err)
		}
		return nil, notJudged, noneJudged(live, notJudged, why)
	}
	if end, expired := obs.Leader.ExpiredAt(obs.At); expired && obs.Leader.Holder != "" {
		// The holder may have stepped down for a standby: no restart on a guess.
		return nil, notJudged, noneJudged(live, notJudged, fmt.Sprintf("leader Lease %s held by %q expired at %s (last renewal + leaseDurationSeconds): no current leader",
			cfg.LeaderLease, obs.Leader.Holder, end.UTC().Format(time.RFC3339)))
	}
	for _, p := range live {
		// client-go's leader election names the pod, or "<pod name>_<uuid>".
		if h := obs.Leader.Holder; h == p.Name || strings.HasPrefix(h, p.Name+"_") {
			judged = append(judged, p)
		} else {
			notJudged[p.UID] = fmt.Sprintf("standby (Lease %s is held by %q)", cfg.LeaderLease, obs.Leader.Holder)
		}
	}
	if len(judged) == 0 && obs.Leader.Holder == "" {
		return nil, notJudged, fmt.Sprintf("leader Lease %s has no holder", cfg.LeaderLease)
	}
	if len(judged) == 0 {
		return nil, notJudged, fmt.Sprintf("leader Lease %s is held by %q, which is not a live scheduler pod", cfg.LeaderLease, obs.Leader.Holder)
	}
	return judged, notJudged, ""
}

// noneJudged lists every live pod as not judged for why, the run's problem.
func noneJudged(live []Pod, notJudged map[string]string, why string) string {
	for _, p := range live {
		notJudged[p.UID] = why
	}
	return why
}

// deploymentsPods keeps the live pods whose owner chain, read by UID, leads to the
// scheduler Deployment, and lists the others as not judged.
func deploymentsPods(o *Ownership, live []Pod, notJudged map[string]string) (owned []Pod, problem string) {
	switch {
	case o == nil:
		return nil, noneJudged(live, notJudged, "the scheduler Deployment's pods were not read")
	case o.Err != nil:
		return nil, noneJudged(live, notJudged, fmt.Sprintf("cannot tell the pods of Deployment %s: %v", o.Deployment, o.Err))
	case !o.Found:
		return nil, noneJudged(live, notJudged, fmt.Sprintf("Deployment %s not found: no pod is judged (set --deployment to the scheduler's, or --judge-pods selector for a scheduler that no Deployment runs)", o.Deployment))
	}
	for _, p := range live {
		c, read := o.Chains[p.UID]
		switch {
		case o.Owns(p):
			owned = append(owned, p)
		case read:
			notJudged[p.UID] = fmt.Sprintf("not a pod of Deployment %s: %s", o.Deployment, c.Detail)
		case p.ControllerName == "":
			notJudged[p.UID] = fmt.Sprintf("not a pod of Deployment %s: it has no controller", o.Deployment)
		default:
			notJudged[p.UID] = fmt.Sprintf("not a pod of Deployment %s: its controller is %s %s", o.Deployment, p.ControllerKind, p.ControllerName)
		}
	}
	if len(owned) == 0 {
		return nil, fmt.Sprintf("no live pod of Deployment %s matches the selector (%d other live pod%s, not judged)",
			o.Deployment, len(live), map[bool]string{true: " does", false: "s do"}[len(live) == 1])
	}
	return owned, ""
}

const tooManyPrefix = "too many scheduler pods"

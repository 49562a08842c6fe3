// Package doctor is `watchdog doctor`: a preflight of a new install that checks,
// one line each, everything a watchdog run depends on, the way `linkerd check` or
// `flux check` do. It only reads, except for server-side dry runs (`dryRun=All`,
// which persist nothing) and, when asked, one test delivery per alert sink.
package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/endpoints"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/observe"
	"github.com/agentenv/watchdog/pkg/probe"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// ClockTolerance is how far the API server's clock may be from ours: far less than runs
// allow (decide.ClockSkewTolerance), so a drifting clock is fixed before judgements depend on it.
const ClockTolerance = 5 * time.Second

// Groups of checks, in the order they are run and printed.
const (
	GroupAPI       = "API server"
	GroupRBAC      = "Permissions"
	GroupScheduler = "Scheduler"
	GroupDiscovery = "Discovery"
	GroupObjects   = "Objects"
	GroupState     = "State"
	GroupAlerts    = "Alerts"
)

// Result is one check.
type Result struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	// OK is false only for a failed check; a skipped check is OK and Skipped; a
	// check that passed with a doubt is OK and Warning (its Hint says what to do).
	OK      bool   `json:"ok"`
	Skipped bool   `json:"skipped,omitempty"`
	Warning bool   `json:"warning,omitempty"`
	Detail  string `json:"detail"`
	Hint    string `json:"hint,omitempty"` // how to fix a failed check
}

// Sink is one configured alert destination and its test delivery.
type Sink struct {
	Name string
	Send func(ctx context.Context) error
	// Reach connects to the sink without sending anything (nil: cannot be checked).
	Reach func(ctx context.Context) error
}

// Doctor checks what a run being prepared for depends on.
type Doctor struct {
	*observe.Observer // the run's own, from the same configuration
	Needs             // the run's settings that decide its calls
	// Sinks are the configured alert sinks; SendTest delivers a test alert to each.
	Sinks     []Sink
	SendTest  bool
	OutboxKey bool          // the runs have a key (--key-secret or --outbox-key)
	Probe     *probe.Prober // the run's discovery probe, nil when off
	results   []Result
}

func (d *Doctor) pass(group, name, detail string) {
	d.results = append(d.results, Result{Group: group, Name: name, OK: true, Detail: detail})
}

func (d *Doctor) fail(group, name, detail, hint string) {
	d.results = append(d.results, Result{Group: group, Name: name, Detail: detail, Hint: hint})
}

// warn records a check that passed with a doubt a run will act on (exit code 0), with what to do.
func (d *Doctor) warn(group, name, detail, hint string) {
	d.results = append(d.results, Result{Group: group, Name: name, OK: true, Warning: true, Detail: detail, Hint: hint})
}

func (d *Doctor) skip(group, name, detail string) {
	d.results = append(d.results, Result{Group: group, Name: name, OK: true, Skipped: true, Detail: detail})
}

// Run checks everything, in order, and returns one result per check. Checks that
// depend on a failed one are skipped and say so.
func (d *Doctor) Run(ctx context.Context) []Result {
	d.results = nil
	ok := d.checkAPI(ctx)
	if ok && kube.NamespaceMissing(ctx, d.Client, d.Namespace) { // all else would fail
		d.fail(GroupAPI, "namespace exists", "namespace "+d.Namespace+" does not exist",
			"give the scheduler's namespace: -n/--namespace (WATCHDOG_NAMESPACE)")
		ok = false
	}
	if ok {
		d.checkRBAC(ctx)
		pods := d.checkPods(ctx)
		d.checkJudged(ctx, pods)
		d.checkMetrics(ctx, pods)
		d.checkSlices(ctx)
		d.checkProbe(ctx, pods)
		d.checkObjects(ctx)
		d.checkState(ctx)
	} else {
		for _, g := range []string{GroupRBAC, GroupScheduler, GroupDiscovery, GroupObjects, GroupState} {
			d.skip(g, "checks of this group", "the API server is not reachable, or the namespace does not exist")
		}
	}
	d.checkSinks(ctx)
	return d.results
}

// checkAPI reads /version: the API server answers, and its clock agrees with ours.
func (d *Doctor) checkAPI(ctx context.Context) bool {
	before := d.Clock.Now()
	info, date, err := d.Client.ServerVersion(ctx)
	after := d.Clock.Now()
	if info == nil {
		d.fail(GroupAPI, "API server is reachable", fmt.Sprintf("%s: %v", d.APIServer, err),
			"check the kubeconfig (--kubeconfig, --context) or, in a pod, that the ServiceAccount token is mounted and the API server is reachable from the pod network (NetworkPolicy egress)")
		d.skip(GroupAPI, "clock agrees with the API server", "the API server is not reachable")
		return false
	}
	d.pass(GroupAPI, "API server is reachable", fmt.Sprintf("Kubernetes %s at %s", info.GitVersion, d.APIServer))
	if err != nil {
		d.fail(GroupAPI, "clock agrees with the API server", err.Error(), "a proxy between the watchdog and the API server drops the Date header; the clock cannot be compared")
		return true
	}
	skew := Skew(before, after, date)
	detail := fmt.Sprintf("API server clock %s, ours %s (difference %s, tolerance %s)", date.UTC().Format(time.RFC3339), after.UTC().Format(time.RFC3339), skew.Round(time.Millisecond), ClockTolerance)
	if skew > ClockTolerance || skew < -ClockTolerance {
		d.fail(GroupAPI, "clock agrees with the API server", detail,
			"synchronize this node's clock (NTP/chrony): the watchdog judges lease expiry and startup grace against times other machines wrote")
		return true
	}
	d.pass(GroupAPI, "clock agrees with the API server", detail)
	return true
}

// Skew is how far the server's clock is ahead of ours (negative: behind): we sent at before, had the
// answer at after, and the server stamped it date, to the second. Zero when the readings overlap.
func Skew(before, after, date time.Time) time.Duration {
	return max(date.Sub(after), 0) + min(date.Add(time.Second).Sub(before), 0) // one of the two at most
}

// checkRBAC asks whether this identity may make each call of the configuration: a
// SelfSubjectAccessReview per verb and resource, with the name where the Role can narrow it.
func (d *Doctor) checkRBAC(ctx context.Context) {
	for _, a := range d.Required() {
		name := "can " + a.String()
		review, err := d.Client.CreateSelfSubjectAccessReview(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: d.Namespace, Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
			}},
		})
		switch {
		case err != nil:
			d.fail(GroupRBAC, name, fmt.Sprintf("access review failed: %v", err), "the API server must serve authorization.k8s.io/v1 SelfSubjectAccessReviews (every authenticated user may create them)")
		case !review.Status.Allowed:
			why := cmp.Or(strings.TrimSpace(review.Status.Reason+" "+review.Status.EvaluationError), "no rule allows it")
			d.fail(GroupRBAC, name, fmt.Sprintf("denied in namespace %s (%s); needed to %s", d.Namespace, why, a.Why), rbacHint(a, d.Namespace))
		default:
			d.pass(GroupRBAC, name, "needed to "+a.Why)
		}
	}
}

func rbacHint(a Access, ns string) string {
	names := ""
	if a.Name != "" {
		names = fmt.Sprintf(", resourceNames: [%s]", a.Name)
	}
	return fmt.Sprintf("grant it in the Role bound to the watchdog's identity: {apiGroups: [%s], resources: [%s], verbs: [%s]%s} in namespace %s (the chart's Role does for this configuration); check with `kubectl auth can-i %s -n %s --as system:serviceaccount:<namespace>:<serviceaccount>`, or all of them at once with `watchdog doctor -n %s --as system:serviceaccount:<namespace>:<serviceaccount>`",
		cmp.Or(a.Group, `""`), a.resource(), a.Verb, names, ns, a.String(), ns, ns)
}

// checkPods lists the scheduler pods as a run does. It returns the pods to scrape.
func (d *Doctor) checkPods(ctx context.Context) []corev1.Pod {
	const name = "scheduler pods match --scheduler-selector"
	list, err := d.Client.ListPods(ctx, d.Namespace, kube.FromCache(metav1.ListOptions{LabelSelector: d.Selector}))
	if err != nil {
		d.fail(GroupScheduler, name, fmt.Sprintf("list pods (%s) in %s: %v", d.Selector, d.Namespace, err), "see the permission checks above: the watchdog must list pods in --namespace")
		return nil
	}
	if len(list.Items) == 0 {
		d.fail(GroupScheduler, name, fmt.Sprintf("no pod in namespace %s matches %q", d.Namespace, d.Selector),
			fmt.Sprintf("set --scheduler-selector (chart: scheduler.selector) to the scheduler pods' labels, and --namespace to theirs; compare `kubectl get pods -n %s --show-labels`", d.Namespace))
		return nil
	}
	var live []corev1.Pod
	withContainer := 0
	for _, p := range list.Items {
		if slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == d.Container }) {
			withContainer++
		}
		if decide.Live(d.Describe(&p)) {
			live = append(live, p)
		}
	}
	described := join(list.Items, ", ", func(p corev1.Pod) string {
		return fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase)
	})
	d.pass(GroupScheduler, name, fmt.Sprintf("%d pod(s) match %q: %s", len(list.Items), d.Selector, described))
	const cname = "scheduler pods have the --scheduler-container"
	if withContainer == 0 {
		d.fail(GroupScheduler, cname, fmt.Sprintf("no matching pod has a container named %q", d.Container),
			"set --scheduler-container (chart: scheduler.container) to the scheduler's container: its start is the process age that startup grace counts from")
	} else {
		d.pass(GroupScheduler, cname, fmt.Sprintf("container %q in %d of %d pod(s)", d.Container, withContainer, len(list.Items)))
	}
	return live
}

// checkJudged says which live pods a run judges (--judge-pods, --max-pods; the leader Lease picks
// among them at run time): several without --leader-lease warns (no restart can pass), none fails.
func (d *Doctor) checkJudged(ctx context.Context, pods []corev1.Pod) {
	const name = "scheduler pods a run judges"
	if len(pods) == 0 {
		d.skip(GroupScheduler, name, "no live scheduler pod")
		return
	}
	obs := decide.Observation{At: d.Clock.Now()}
	for i := range pods {
		obs.Pods = append(obs.Pods, d.Describe(&pods[i]))
	}
	if d.Reads.JudgePods == decide.JudgeDeployment {
		obs.Ownership = d.Ownership(ctx, obs.Pods)
	}
	sel := d.Reads.Selection
	sel.LeaderLease = "" // which pod leads is the run's to read
	judged, notJudged, problem := decide.Judged(obs, sel)
	detail := "judged: " + join(judged, ", ", func(p decide.Pod) string { return p.Name })
	if skipped := slices.DeleteFunc(slices.Clone(obs.Pods), func(p decide.Pod) bool { return notJudged[p.UID] == "" }); len(skipped) > 0 {
		detail += "; not judged: " + join(skipped, "; ", func(p decide.Pod) string {
			return fmt.Sprintf("%s (%s)", p.Name, notJudged[p.UID])
		})
	}
	switch {
	case len(judged) == 0:
		const orSelector = ", or --judge-pods selector (chart: scheduler.judgePods) for a scheduler that no Deployment runs"
		hint := "narrow --scheduler-selector (chart: scheduler.selector) to the scheduler's pods, or raise --max-pods"
		switch own := obs.Ownership; {
		case own != nil && own.Err != nil: // refused or failed reads (a Role of one's own lacking get replicasets)
			hint = fmt.Sprintf("the watchdog needs get deployments/%s and get replicasets in %s to tell the Deployment's pods (the chart's Role grants both; see the permission checks)"+orSelector, d.Observer.Deployment, d.Namespace)
		case d.Reads.JudgePods == decide.JudgeDeployment:
			hint = "set --deployment (chart: scheduler.deployment) to the Deployment that runs the scheduler" + orSelector
		}
		d.fail(GroupScheduler, name, problem, hint)
	case len(judged) > 1 && d.Reads.LeaderLease == "":
		d.warn(GroupScheduler, name, fmt.Sprintf("%d pods are judged and --leader-lease is not set: %s", len(judged), detail),
			"no restart will happen while several pods are judged (the single-target gate cannot tell which leads): set --leader-lease (chart: scheduler.leaderLease) for an HA scheduler; with --judge-pods selector, narrow --scheduler-selector or use --judge-pods deployment")
	default:
		d.pass(GroupScheduler, name, detail)
	}
}

// checkMetrics scrapes every live scheduler pod, with the run's scraper.
func (d *Doctor) checkMetrics(ctx context.Context, pods []corev1.Pod) {
	if len(pods) == 0 {
		d.skip(GroupScheduler, "scheduler metrics answer", "no live scheduler pod to scrape")
		return
	}
	for i := range pods {
		pod := &pods[i]
		name := "metrics of pod " + pod.Name
		url := d.URL(pod)
		if url == "" {
			d.fail(GroupScheduler, name, "the pod has no IP yet", "wait until the pod runs, then run doctor again")
			continue
		}
		sample, err := d.Scraper.Scrape(ctx, url)
		if err != nil {
			d.fail(GroupScheduler, name, err.Error()+"; "+"scraped "+d.Via.Describe(), scrapeHint(scrape.KindOf(err), d.Via, d.MetricsPort, d.MetricsPath))
			continue
		}
		observed := join(slices.Sorted(maps.Keys(sample.Observed)), " ", func(k string) string {
			return fmt.Sprintf("%s=%d", k, sample.Observed[k])
		})
		d.pass(GroupScheduler, name, fmt.Sprintf("%s carries %s (%s) and %s (Heartbeat ok %d, rejected %d); %s",
			url, scrape.ObservedNodesMetric, observed, scrape.RPCDurationMetric, sample.HeartbeatOK, sample.HeartbeatRejected, "scraped "+d.Via.Describe()))
	}
}

// join formats each of xs and joins them with sep.
func join[T any](xs []T, sep string, format func(T) string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = format(x)
	}
	return strings.Join(out, sep)
}

func scrapeHint(kind scrape.Kind, via scrape.Via, port int, path string) string {
	if via == scrape.ViaAPIServer && (kind == scrape.KindHTTPStatus || kind == scrape.KindUnreachable || kind == scrape.KindTimeout) {
		return "through the API server's pod proxy: you need `get pods/proxy` in the namespace, and the API server must reach the pod IP; from inside the cluster, --scrape-via direct needs neither"
	}
	switch kind {
	case scrape.KindUnreachable:
		return fmt.Sprintf("the watchdog must reach each scheduler pod on --metrics-port %d: check the port (chart: scheduler.metricsPort) and any NetworkPolicy in front of the scheduler", port)
	case scrape.KindTimeout:
		return "the metrics endpoint did not answer in --scrape-timeout: check the network path to the pod, or raise --scrape-timeout (chart: scheduler.scrapeTimeout)"
	case scrape.KindHTTPStatus, scrape.KindNotMetrics:
		return fmt.Sprintf("something answered, but not the scheduler's metrics: check --metrics-path %s and --metrics-port %d (chart: scheduler.metricsPath, scheduler.metricsPort)", path, port)
	case scrape.KindTooLarge:
		return "raise --metrics-max-bytes (chart: scheduler.metricsMaxBytes)"
	case scrape.KindAbsent:
		return fmt.Sprintf("the page lacks %s: is --metrics-port %d the scheduler's own metrics port, and is the scheduler a version that exports it?", scrape.ObservedNodesMetric, port)
	}
	return "the page cannot be trusted: every run would judge this scheduler unknown; see the detail"
}

// checkSlices reads the nodes Service's EndpointSlices as a run does (observe.EndpointLister).
func (d *Doctor) checkSlices(ctx context.Context) {
	const name = "nodes Service has EndpointSlices with --nodes-port"
	count, err := d.Endpoints.Read(ctx, false)
	var wrong *endpoints.MisconfiguredError
	switch {
	case errors.As(err, &wrong) && count.AllSlices == 0:
		d.fail(GroupDiscovery, name, fmt.Sprintf("no EndpointSlice in %s is labelled %s=%s", d.Namespace, discoveryv1.LabelServiceName, d.Endpoints.Service),
			fmt.Sprintf("set --nodes-service (chart: scheduler.nodesService) to the Service the scheduler discovers nodes through; compare `kubectl get endpointslices -n %s -L %s`", d.Namespace, discoveryv1.LabelServiceName))
	case errors.As(err, &wrong):
		ports := cmp.Or(join(count.OtherPorts, ", ", func(p int32) string { return fmt.Sprint(p) }), "none")
		d.fail(GroupDiscovery, name, fmt.Sprintf("%d EndpointSlice(s) of %s, none with port %d (ports: %s)", count.AllSlices, d.Endpoints.Service, d.Endpoints.Port, ports),
			"set --nodes-port (chart: scheduler.nodesPort) to the node port the scheduler's discovery counts")
	case err != nil:
		d.fail(GroupDiscovery, name, err.Error(), "see the permission checks above: the watchdog must list endpointslices in --namespace")
	case count.Slices == 0:
		// A Service without endpoints: its placeholder slice carries no port.
		d.pass(GroupDiscovery, name, fmt.Sprintf("%s has no endpoints yet: discovery should see 0 nodes", d.Endpoints.Service))
	default:
		d.pass(GroupDiscovery, name, fmt.Sprintf("%d of %d EndpointSlice(s) carry port %d: %d serving node(s), %d lingering", count.Slices, count.AllSlices, d.Endpoints.Port, count.Serving, count.Lingering))
	}
}

// checkPause says whether the Deployment's pause annotations hold the restarts, or are ignored.
func (d *Doctor) checkPause(name string, ann map[string]string) {
	const pname = "restarts not paused"
	unpause := fmt.Sprintf("kubectl -n %s annotate deployment %s %s- %s-", d.Namespace, name, decide.PauseUntilAnnotation, decide.PauseReasonAnnotation)
	switch p, ignored := decide.ReadPause(name, ann, d.Clock.Now(), d.Clock.Now()); {
	case p != nil:
		d.warn(GroupObjects, pname, p.String()+": the watchdog judges, records and pages, and restarts nothing", "to resume restarts before then: "+unpause)
	case ignored != "":
		d.warn(GroupObjects, pname, ignored, fmt.Sprintf("fix the annotations (%s: an RFC 3339 time at most %s ahead; %s: why) or remove them: %s",
			decide.PauseUntilAnnotation, decide.ShortDuration(decide.MaxPause), decide.PauseReasonAnnotation, unpause))
	default:
		d.pass(GroupObjects, pname, fmt.Sprintf("Deployment %s has no %s annotation", name, decide.PauseUntilAnnotation))
	}
}

// checkObjects reads the Deployment and the Leases the configuration names.
func (d *Doctor) checkObjects(ctx context.Context) {
	const dname = "scheduler Deployment exists"
	dep, err := d.Client.GetDeployment(ctx, d.Namespace, d.Observer.Deployment, kube.Quorum)
	switch {
	case apierrors.IsNotFound(err):
		d.fail(GroupObjects, dname, fmt.Sprintf("Deployment %s/%s not found", d.Namespace, d.Observer.Deployment),
			"set --deployment (chart: scheduler.deployment) to the scheduler's Deployment: the rollout gate, Events and the rollout restart use it")
	case err != nil:
		d.fail(GroupObjects, dname, fmt.Sprintf("get Deployment %s/%s: %v", d.Namespace, d.Observer.Deployment, err), "see the permission checks above")
	default:
		d.pass(GroupObjects, dname, fmt.Sprintf("%s: %d of %d replica(s) updated, %d ready, paused %t",
			dep.Name, dep.Status.UpdatedReplicas, ptr.Deref(dep.Spec.Replicas, 1), dep.Status.ReadyReplicas, dep.Spec.Paused))
		d.checkPause(dep.Name, dep.Annotations)
	}

	// The election Lease need not exist: the first elected watchdog creates it (if RBAC allows).
	for _, l := range []struct{ check, name, off, missing string }{
		{"scheduler leader Lease exists", d.Reads.LeaderLease, "--leader-lease is not set: every pod a run judges is a target (see the Scheduler checks)",
			"set --leader-lease (chart: scheduler.leaderLease) to the Lease the scheduler's replicas elect their leader through, or leave it empty for a single scheduler"},
		{"election Lease of `run --leader-elect`", d.ElectionLease, "no leader election (--leader-elect is off)", ""},
	} {
		if l.name == "" {
			d.skip(GroupObjects, l.check, l.off)
			continue
		}
		ref := d.Namespace + "/" + l.name
		lease, err := d.Client.GetLease(ctx, d.Namespace, l.name)
		switch {
		case apierrors.IsNotFound(err) && l.missing == "":
			d.pass(GroupObjects, l.check, fmt.Sprintf("Lease %s does not exist yet: the first watchdog creates it", ref))
		case apierrors.IsNotFound(err):
			d.fail(GroupObjects, l.check, fmt.Sprintf("Lease %s not found", ref), l.missing)
		case err != nil:
			d.fail(GroupObjects, l.check, fmt.Sprintf("get Lease %s: %v", ref, err), "see the permission checks above")
		default:
			holder := cmp.Or(ptr.Deref(lease.Spec.HolderIdentity, ""), "nobody")
			d.pass(GroupObjects, l.check, fmt.Sprintf("Lease %s, held by %s", ref, holder))
		}
	}
}

// checkState reads the state ConfigMap and proves it can be written: a server-side dry run
// (authorized, admitted, nothing persisted) of a run's update, at the resourceVersion just read.
func (d *Doctor) checkState(ctx context.Context) {
	const rname, wname = "state ConfigMap can be read", "state ConfigMap can be written"
	ref := d.Namespace + "/" + d.StateConfigMap
	dry := []string{metav1.DryRunAll}
	// A run writing in between makes the dry run conflict: read again, once.
	for attempt := range 2 {
		cm, err := d.Client.GetConfigMap(ctx, d.Namespace, d.StateConfigMap)
		if apierrors.IsNotFound(err) {
			d.pass(GroupState, rname, fmt.Sprintf("%s does not exist yet: the first run starts with empty state", ref))
			fresh := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: d.StateConfigMap, Namespace: d.Namespace}}
			if _, err := d.Client.CreateConfigMap(ctx, fresh, metav1.CreateOptions{DryRun: dry, FieldManager: "watchdog"}); err != nil {
				d.fail(GroupState, wname, fmt.Sprintf("creating %s (server-side dry run) failed: %v", ref, err),
					"install with the chart (it creates the state ConfigMap), or grant create on configmaps in --namespace")
				return
			}
			d.pass(GroupState, wname, fmt.Sprintf("creating %s is allowed (server-side dry run: nothing written)", ref))
			return
		}
		if err != nil {
			d.fail(GroupState, rname, fmt.Sprintf("get %s: %v", ref, err), "see the permission checks above: the watchdog must get its ConfigMap by name")
			d.skip(GroupState, wname, "the ConfigMap could not be read")
			return
		}
		if attempt == 0 {
			detail, err := stateDetail(cm)
			if err != nil {
				d.fail(GroupState, rname, fmt.Sprintf("%s: %v", ref, err), "run a watchdog at least as new as the one that wrote the state (image tag), or move the document aside by hand if the rollback is intended")
				d.skip(GroupState, wname, "no run would write over this state")
				return
			}
			d.pass(GroupState, rname, detail)
		}
		_, err = d.Client.UpdateConfigMap(ctx, cm.DeepCopy(), metav1.UpdateOptions{DryRun: dry, FieldManager: "watchdog"})
		switch {
		case apierrors.IsConflict(err) && attempt == 0: // read again
		case err != nil:
			d.fail(GroupState, wname, fmt.Sprintf("updating %s at resourceVersion %s (server-side dry run) failed: %v", ref, cm.ResourceVersion, err),
				"the watchdog must update its ConfigMap by name (see the permission checks above); an admission policy refusing the update would refuse every run's too")
			return
		default:
			d.pass(GroupState, wname, fmt.Sprintf("an update at resourceVersion %s is accepted (server-side dry run: nothing written)", cm.ResourceVersion))
			return
		}
	}
}

// stateDetail describes the stored state; an error: a newer watchdog's document no run will use.
func stateDetail(cm *corev1.ConfigMap) (string, error) {
	ref := cm.Namespace + "/" + cm.Name
	raw, ok := cm.Data[statestore.DataKey]
	if !ok {
		return fmt.Sprintf("%s exists with no state yet (the chart creates it empty)", ref), nil
	}
	s, err := state.Decode([]byte(raw))
	if _, newer := errors.AsType[*state.NewerVersionError](err); newer {
		return "", err
	}
	if err != nil {
		// Not a failure: the next run starts fresh and keeps the document.
		return fmt.Sprintf("%s: the stored state is unreadable (%v); the next run starts with empty state and keeps it under %s", ref, err, statestore.CorruptKey), nil
	}
	if s.UpdatedAt.IsZero() {
		return fmt.Sprintf("%s: state readable", ref), nil
	}
	return fmt.Sprintf("%s: state readable, last written %s", ref, s.UpdatedAt.UTC().Format(time.RFC3339)), nil
}

// checkSinks delivers a test alert to each sink (SendTest) or lists them; and the key.
func (d *Doctor) checkSinks(ctx context.Context) {
	if len(d.Sinks) == 0 {
		d.skip(GroupAlerts, "alert sinks", "none configured: alerts reach only the logs and Events (--slack-webhook-url, --webhook-url, --alertmanager-url, --heartbeat-url)")
		return
	}
	for _, s := range d.Sinks {
		name := s.Name + " accepts a test alert"
		if !d.SendTest {
			d.checkReach(ctx, s)
			d.skip(GroupAlerts, name, "configured; not sent (run with --send-test to deliver a test alert)")
			continue
		}
		if err := s.Send(ctx); err != nil {
			hint := fmt.Sprintf("check the %s URL and that this pod may reach it (egress, proxy); `watchdog notify test` sends the same test alert", s.Name)
			if errors.Is(err, context.DeadlineExceeded) {
				hint = "the delivery did not finish within --timeout; check egress to the sink"
			}
			d.fail(GroupAlerts, name, err.Error(), hint)
			continue
		}
		d.pass(GroupAlerts, name, "delivered a test alert (marked as a test)")
	}
	// Refused alerts are kept in the state ConfigMap for retry: only the key tells ours from others'.
	const kname = "alerts kept for retry are authenticated"
	if d.OutboxKey {
		d.pass(GroupAlerts, kname, "--key-secret or --outbox-key is set")
		return
	}
	d.fail(GroupAlerts, kname, "neither --key-secret nor --outbox-key is set: an alert written into the state ConfigMap's outbox by anyone who may edit it would be retried as the watchdog's (rebuilt from its facts, but not authenticated)",
		"leave --key-secret at its default (the first run creates that Secret) or set --outbox-key")
}

// checkReach connects to a sink as a delivery would, sending nothing: the network path and TLS.
func (d *Doctor) checkReach(ctx context.Context, s Sink) {
	if s.Reach == nil {
		return
	}
	name := s.Name + " is reachable"
	if err := s.Reach(ctx); err != nil {
		hint := "this pod cannot open a connection to the sink: check egress (chart: networkPolicy.alertReceivers and extraEgress; DNS), a proxy (HTTPS_PROXY) and the URL's host and port"
		if strings.Contains(err.Error(), "TLS handshake") {
			hint = "the receiver's TLS certificate is not accepted, so every delivery would fail the same way: it must chain to a CA the watchdog trusts (the image's CA bundle) and name the URL's host"
		}
		d.fail(GroupAlerts, name, err.Error(), hint)
		return
	}
	d.pass(GroupAlerts, name, "connected as a delivery would (https: TLS handshake verified); nothing sent")
}

package doctor

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/agentenv/watchdog/pkg/probe"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// checkProbe checks the discovery probe's path: each pod's ListNodes against the serving nodes,
// the canary's address and write (server-side dry run), and when a pass last saw a canary.
func (d *Doctor) checkProbe(ctx context.Context, pods []corev1.Pod) {
	p := d.Probe
	if p == nil {
		d.skip(GroupDiscovery, "discovery probe", "off: --discovery-probe off, or the scheduler's gRPC port is not reachable from here (--scrape-via apiserver)")
		return
	}
	count, err := d.Endpoints.Read(ctx, false)
	for i := range pods {
		pod := d.Describe(&pods[i])
		name := "ListNodes of pod " + pod.Name
		nodes, lerr := p.RPC.ListNodes(ctx, p.AddrOf(pod))
		if lerr != nil { // runs judge it without the probe: a doubt, not a failure
			d.warn(GroupDiscovery, name, lerr.Error()+": runs judge this pod without the discovery probe", fmt.Sprintf("allow TCP %d from the watchdog to the scheduler pods (a NetworkPolicy; the chart's allows it) or set --scheduler-grpc-port (chart: scheduler.grpcPort); Unavailable \"not the leader\" is an HA standby (set --leader-lease); Unimplemented is a scheduler without ListNodes (--discovery-probe off)", p.GRPCPort))
			continue
		}
		detail := fmt.Sprintf("%s names %d node(s)", p.AddrOf(pod), len(nodes))
		if err != nil {
			d.pass(GroupDiscovery, name, detail)
			continue
		}
		unknown := slices.DeleteFunc(slices.Clone(count.Nodes), func(n string) bool {
			return slices.ContainsFunc(nodes, func(x probe.Node) bool { return x.ID == n })
		})
		if len(unknown) > 0 {
			d.warn(GroupDiscovery, name, fmt.Sprintf("%s; %d of the %d serving node(s) unknown to it: %v", detail, len(unknown), len(count.Nodes), unknown[:min(len(unknown), 5)]),
				"a node just added shows within a second; unknown for minutes, the scheduler's discovery is stale: the watchdog restarts it after --probe-window")
			continue
		}
		d.pass(GroupDiscovery, name, detail+fmt.Sprintf(", every one of the %d serving", len(count.Nodes)))
	}
	if p.Mode != probe.Canary {
		d.skip(GroupDiscovery, "canary", "--discovery-probe list: no canary is written")
		return
	}
	if err := p.Preflight(ctx); err != nil {
		d.fail(GroupDiscovery, "canary can be written", err.Error(), "grant create, and get and delete by name, on endpointslices (chart: probe.mode canary renders them), keep the admission policy's canary rules, and --probe-address this pod's IP with --nodes-port free")
	} else {
		d.pass(GroupDiscovery, "canary can be written", fmt.Sprintf("answering on %s:%d and creating EndpointSlice %s/%s are allowed (server-side dry run: nothing written)", p.Address, p.Port, p.Namespace, p.Name))
	}
	d.lastCanary(ctx)
}

// lastCanary says when a pass last saw a canary in a scheduler's node list.
func (d *Doctor) lastCanary(ctx context.Context) {
	const name = "last canary seen"
	var seen *time.Time
	s := state.New()
	cm, err := d.Client.GetConfigMap(ctx, d.Namespace, d.StateConfigMap)
	if err == nil {
		if s, err = state.Decode([]byte(cm.Data[statestore.DataKey])); err != nil {
			err = fmt.Errorf("%s/%s %s: %w", d.Namespace, d.StateConfigMap, statestore.DataKey, err)
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		d.warn(GroupDiscovery, name, "cannot tell: "+err.Error(), "see the State checks")
		return
	}
	for _, ps := range s.Pods {
		if pr := ps.Probe; pr != nil && pr.SeenAt != nil && (seen == nil || pr.SeenAt.After(*seen)) {
			seen = pr.SeenAt
		}
	}
	if seen == nil {
		d.warn(GroupDiscovery, name, "no pass has seen a canary in the scheduler's node list yet", "run a pass (`kubectl create job --from=cronjob/...`) and read its report's probe line; a canary never seen makes the scheduler wedged after --probe-window")
		return
	}
	d.pass(GroupDiscovery, name, "at "+seen.UTC().Format(time.RFC3339))
}

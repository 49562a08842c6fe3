package cli

import (
	"net"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/observe"
	"github.com/agentenv/watchdog/pkg/probe"
	"github.com/agentenv/watchdog/pkg/scrape"
)

// ProbeOptions configure the discovery probe (docs/design.md, "The discovery probe").
type ProbeOptions struct {
	Mode            string
	GRPCPort        int
	Window          time.Duration
	Address         string
	EndpointSlice   string
	PodName, PodUID string
}

// DefaultProbeWindow: a live informer took up to 85 s to show a new endpoint after an
// API-server outage; a canary missing for less proves nothing.
const DefaultProbeWindow = 3 * time.Minute

func (o *ProbeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Mode, "discovery-probe", string(probe.List), "off; list: compare the scheduler's gRPC ListNodes with the serving nodes (writes nothing); canary: also keep a canary EndpointSlice moving through its discovery, which catches a dead discovery while no node changes")
	fs.IntVar(&o.GRPCPort, "scheduler-grpc-port", 9090, "the scheduler's gRPC port, called on each judged pod's IP (ListNodes only)")
	fs.DurationVar(&o.Window, "probe-window", DefaultProbeWindow, "canaries unseen, or a serving node unknown to the scheduler, this long in all is strong evidence of a dead discovery")
	fs.StringVar(&o.Address, "probe-address", "", "the canary's address (not loopback), where the watchdog answers the gateway's node calls on --nodes-port while the canary exists; in a pod, its IP (the chart sets it)")
	fs.StringVar(&o.EndpointSlice, "probe-endpointslice", "agentenv-scheduler-watchdog-probe", "name of the canary EndpointSlice")
	fs.StringVar(&o.PodName, "pod-name", "", "this watchdog's pod (the chart sets it): the holder of the pass Lease; with --pod-uid the canary's owner, so the garbage collector removes one left behind")
	fs.StringVar(&o.PodUID, "pod-uid", "", "the UID of --pod-name")
}

// Validate reports every invalid flag; a command without them has Mode "": off.
func (o *ProbeOptions) Validate() error {
	if o.Mode == "" {
		return nil
	}
	var p problems
	p.oneOf("--discovery-probe", o.Mode)
	if probe.Mode(o.Mode) == probe.Canary && o.Address == "" {
		p.addf("--discovery-probe canary needs --probe-address (in a pod, the chart sets it to the pod IP)")
	}
	p.port("--scheduler-grpc-port", o.GRPCPort)
	p.positive("--probe-window", o.Window)
	if ip := net.ParseIP(o.Address); o.Address != "" && (ip == nil || ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsMulticast()) {
		p.addf("--probe-address %q: want the IP address of this watchdog, not loopback, link-local or multicast (the API server refuses them in an EndpointSlice)", o.Address)
	}
	p.name("--probe-endpointslice", o.EndpointSlice, validation.IsDNS1123Subdomain)
	if o.PodUID != "" && o.PodName == "" {
		p.addf("--pod-uid needs --pod-name")
	}
	return p.err()
}

// window is the decision's probe window: 0 with the probe off.
func (o *ProbeOptions) window() time.Duration {
	if o.Mode == "" || probe.Mode(o.Mode) == probe.Off {
		return 0
	}
	return o.Window
}

// prober is the pass's probe: nil when off or via the pod proxy, which carries no gRPC (logged).
func (f *checkFlags) prober(o *observe.Observer, clk clock.Clock, log zerolog.Logger) *probe.Prober {
	po := &f.probe
	if po.window() == 0 {
		return nil
	}
	if o.Via == scrape.ViaAPIServer {
		log.Warn().Str("discoveryProbe", po.Mode).Msg("the discovery probe is off: the scheduler's gRPC port cannot be reached through the API server's pod proxy (--scrape-via apiserver); judged without it")
		return nil
	}
	p := &probe.Prober{Mode: probe.Mode(po.Mode), Client: o.Client, Namespace: f.cluster.Namespace, Name: po.EndpointSlice,
		Service: f.check.NodesService, Port: int32(f.check.NodesPort), Address: po.Address, GRPCPort: po.GRPCPort,
		Write: !f.check.DryRun, Clock: clk, RPC: probe.NewClient()}
	if po.PodName != "" && po.PodUID != "" {
		p.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: po.PodName, UID: types.UID(po.PodUID)}
	}
	return p
}

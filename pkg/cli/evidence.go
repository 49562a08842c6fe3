package cli

import (
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/kube"
)

// EvidenceOptions say where the evidence of each restart goes (pkg/evidence).
type EvidenceOptions struct {
	ConfigMap string
	Logs      bool
}

func (o *EvidenceOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigMap, "evidence-configmap", "agentenv-scheduler-watchdog-evidence", "ConfigMap keeping the evidence of the newest restarts (created when missing, if the watchdog may)")
	fs.BoolVar(&o.Logs, "evidence-logs", true, "save the last 200 lines (64 KiB at most) of the scheduler container's log before a restart (needs get pods/log)")
}

// Validate reports every invalid flag, in the order the flags are declared.
func (o *EvidenceOptions) Validate() error {
	var p problems
	p.name("--evidence-configmap", o.ConfigMap, validation.IsDNS1123Subdomain)
	return p.err()
}

// keeper saves a pass's bundles sealed with key (the outbox key; empty: unsealed).
func (o *EvidenceOptions) keeper(client *kube.Client, namespace, container string, key []byte) *evidence.Keeper {
	k := &evidence.Keeper{ConfigMaps: client, Namespace: namespace, ConfigMap: o.ConfigMap, Container: container, Key: key}
	if o.Logs {
		k.Logs = client
	}
	return k
}

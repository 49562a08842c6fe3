package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/statestore"
	"github.com/agentenv/watchdog/pkg/statetext"
)

func newStatusCommand(stdout, stderr io.Writer) *cobra.Command {
	var cluster ClusterOptions
	var output OutputOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the persisted state: last run, pods, restarts, open alerts",
		Example: `  # The last run, each pod's episode, the restart history and open alerts.
  watchdog status -n agentenv-system

  # The same as JSON, e.g. only the restart history.
  watchdog status -n agentenv-system -o json | jq '.state.restarts'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			markStarted(cmd)
			var p problems
			p.add(cluster.Validate())
			p.add(output.Validate())
			if err := p.err(); err != nil {
				return err
			}
			newLogger(&cluster, stderr) // client-go's own lines (klog) stay JSON
			client, cfg, err := newClient(&cluster)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), cluster.Timeout)
			defer cancel()
			store := &statestore.Store{Client: client, Namespace: cluster.Namespace, Name: cluster.StateConfigMap}
			snap, err := store.Load(ctx)
			if err != nil {
				return fmt.Errorf("API server %s: %w", cfg.Host, err)
			}
			if snap.ResourceVersion == "" {
				return noStateHere(ctx, client, cluster.Namespace, cluster.StateConfigMap)
			}
			st := statetext.Status{ConfigMap: cluster.Namespace + "/" + cluster.StateConfigMap, ResourceVersion: snap.ResourceVersion, Warning: snap.Recovered, State: snap.State}
			if output.Structured() {
				return encodeAs(stdout, output.Output, st)
			}
			return st.WriteText(stdout, time.Now())
		},
	}
	cluster.AddFlags(cmd.Flags())
	output.AddFlags(cmd.Flags())
	return cmd
}

// noStateHere is status's error in a namespace without the watchdog's state: it
// says where the state ConfigMap is, when the identity may list ConfigMaps
// across namespaces.
func noStateHere(ctx context.Context, client *kube.Client, ns, name string) error {
	msg := fmt.Sprintf("no watchdog state in namespace %s (ConfigMap %s not found)", ns, name)
	list, err := client.ListConfigMaps(ctx, "", metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	switch {
	case err != nil:
		return fmt.Errorf("%s; other namespaces not searched: %v; give the watchdog's with -n", msg, err)
	case len(list.Items) == 0:
		return fmt.Errorf("%s, nor in any other namespace: has the watchdog run yet? (watchdog doctor checks the install)", msg)
	}
	var where []string
	for _, cm := range list.Items {
		where = append(where, cm.Namespace)
	}
	slices.Sort(where)
	return fmt.Errorf("%s; found in namespace %s: use -n %s", msg, strings.Join(where, ", "), where[0])
}

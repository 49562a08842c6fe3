package cli

import (
	"io"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const validateOnlyFlag = "validate-only"

func addValidateOnlyFlag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, validateOnlyFlag, false, "parse and validate every flag and environment variable, build the API client and the alert sinks, then exit: 0 if the configuration is valid, 2 with the error if not; makes no API call and sends nothing")
}

// checkConfig builds everything a pass of validated flags needs that takes no
// network call: logger, API client configuration, alert sinks. Where no client
// configuration exists at all (CI checking a values file), the client is said to be
// unchecked; a kubeconfig that is named or found but broken is an error.
func (f *checkFlags) checkConfig(stderr io.Writer) error {
	log := newLogger(&f.cluster, stderr)
	apiServer := "not checked: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a pod"
	if !noClientConfig(&f.cluster) {
		_, cfg, err := newClient(&f.cluster)
		if err != nil {
			return err
		}
		apiServer = cfg.Host
	}
	if _, err := buildSinks(&f.alerts, f.cluster.Namespace, func(error) {}); err != nil {
		return err
	}
	log.Info().Str("apiServer", apiServer).Str("namespace", f.cluster.Namespace).Str("restartMethod", f.check.RestartMethod).
		Msg("configuration is valid (--validate-only: no API call made, nothing sent)")
	return nil
}

// noClientConfig: no --kubeconfig or --context, not in a pod, and no kubeconfig file
// where the defaults look ($KUBECONFIG, ~/.kube/config).
func noClientConfig(o *ClusterOptions) bool {
	if o.explicitConfig() || inPod() {
		return false
	}
	cfg, err := clientcmd.NewDefaultClientConfigLoadingRules().Load()
	return err == nil && clientcmdapi.IsConfigEmpty(cfg)
}

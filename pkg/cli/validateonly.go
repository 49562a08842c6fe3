package cli

import (
	"io"

	"github.com/spf13/pflag"
)

// validateOnlyFlag is the flag of check and run that stops after the configuration.
const validateOnlyFlag = "validate-only"

func addValidateOnlyFlag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, validateOnlyFlag, false, "parse and validate every flag and environment variable, build the API client and the alert sinks, then exit: 0 if the configuration is valid, 2 with the error if not; makes no API call and sends nothing")
}

// checkConfig builds everything a pass needs that takes no network call: the flags
// checked against each other, the logger, the API client configuration (in-cluster
// or kubeconfig) and the alert sinks. A configuration that passes starts a watchdog;
// test/chart runs it on every values set the chart accepts.
func (f *checkFlags) checkConfig(stderr io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	log := newLogger(&f.cluster, stderr)
	_, cfg, err := newClient(&f.cluster)
	if err != nil {
		return err
	}
	if _, err := buildSinks(&f.alerts, f.cluster.Namespace, func(error) {}); err != nil {
		return err
	}
	log.Info().Str("apiServer", cfg.Host).Str("namespace", f.cluster.Namespace).Str("restartMethod", f.check.RestartMethod).
		Msg("configuration is valid (--validate-only: no API call made, nothing sent)")
	return nil
}

package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/pkg/doctor"
	"github.com/agentenv/watchdog/pkg/probe"
	"github.com/agentenv/watchdog/pkg/scrape"
)

// doctorHidden are check's flags that change no check of doctor's.
var doctorHidden = []string{"startup-grace", "wedged-for", "confirm-window", "sample-interval", "max-watch-age",
	"restart-on-degraded", "restart-window", "restart-backoff", "restart-backoff-max", "dry-run", "realert-interval", "blind-after", "probe-window"}

func newDoctorCommand(stdout, stderr io.Writer) *cobra.Command {
	df := &doctorFlags{}
	f := &df.checkFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Preflight: check everything a run depends on, with a fix for each failure",
		Long: `doctor checks, for the configuration given by the same flags (and WATCHDOG_*
variables) as check, everything a run depends on: the API server answers and its clock
agrees with ours (within 5s); this identity may make every call the configuration makes
(a SelfSubjectAccessReview each, by object name where the chart's Role narrows it); the
scheduler pods match --scheduler-selector and their metrics answer with the families the
watchdog reads; the --nodes-service EndpointSlices exist and carry --nodes-port; the
--deployment and --leader-lease exist; the state ConfigMap can be read and written (a
server-side dry run: nothing is written); and, with --send-test, each alert sink accepts a
test alert. Checks that do not apply are shown as skipped.

doctor changes nothing in the cluster. The chart runs it as its ` + "`helm test`" + ` hook.

Exit codes: 0 every check passed; 1 a check failed (each ✗ line says how to fix it);
2 bad usage or configuration.`,
		Example: `  # Before the first run, with the settings the CronJob will use:
  watchdog doctor --namespace agentenv-system

  # For scripts, and with a test delivery to every configured sink:
  watchdog doctor -o json --send-test --webhook-url https://alerts.example.com/hook

  # With your kubeconfig, as the ServiceAccount of the README's release "watchdog":
  watchdog doctor --as system:serviceaccount:agentenv-system:watchdog-agentenv-scheduler-watchdog

  # In-cluster, as the chart's ServiceAccount, with the chart's settings:
  helm test <release> -n agentenv-system --logs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return df.run(cmd.Context(), stdout, stderr) },
	}
	addFlags(cmd, &f.cluster, &f.check, &f.probe, &f.alerts, &f.output, &f.evidence)
	hideFlags(cmd.Flags(), doctorHidden...)
	cmd.Flags().BoolVar(&df.sendTest, "send-test", false, "deliver a clearly marked test alert to each configured sink (as notify test does) and ping --heartbeat-url")
	cmd.Flags().BoolVar(&df.leaderElect, "leader-elect", false, "check the election Lease and rights of run --leader-elect too")
	cmd.Flags().StringVar(&df.leaderElectLease, "leader-elect-lease", "agentenv-scheduler-watchdog", "the `name` of the Lease of run --leader-elect")
	cmd.Flags().BoolVar(&df.watchEndpoints, "watch-endpoints", false, "check the rights of run --watch-endpoints too (watch endpointslices)")
	return cmd
}

// doctorFlags are check's options (doctor checks exactly what a pass would use) and
// run's election settings (the chart's test hook checks the election Lease too).
type doctorFlags struct {
	checkFlags
	sendTest, leaderElect, watchEndpoints bool
	leaderElectLease                      string
}

func (df *doctorFlags) run(parent context.Context, stdout, stderr io.Writer) error {
	f := &df.checkFlags
	if err := f.validate(f.evidence.Validate(), needLease(df.leaderElect, df.leaderElectLease)); err != nil {
		return err
	}
	newLogger(&f.cluster, stderr)
	o, err := f.observer(clock.RealClock{})
	if err != nil {
		return err
	}
	sinks, err := testSinks(&f.alerts, f.cluster.Namespace, "doctor --send-test", df.sendTest)
	if err != nil {
		return err
	}
	d := &doctor.Doctor{
		Observer:  o,
		Sinks:     sinks,
		SendTest:  df.sendTest,
		OutboxKey: f.evidence.OutboxKey != "" || f.evidence.KeySecret != "",
		Probe:     f.prober(o, clock.RealClock{}, zerolog.Nop()),
		Needs: doctor.Needs{
			StateConfigMap:     f.cluster.StateConfigMap,
			Deployment:         o.Deployment,
			JudgePods:          o.Reads.JudgePods,
			LeaderLease:        o.Reads.LeaderLease,
			Lease:              f.cluster.Lease,
			EvidenceConfigMap:  f.evidence.ConfigMap,
			EvidenceLogs:       f.evidence.Logs,
			KeySecret:          f.evidence.KeySecret,
			WatchEndpoints:     df.watchEndpoints,
			RestartMethod:      f.check.RestartMethod,
			MaxRestarts:        f.check.MaxRestarts,
			ScrapeViaAPIServer: f.runsVia() == scrape.ViaAPIServer,
		},
	}
	if df.leaderElect {
		d.ElectionLease = df.leaderElectLease
	}
	// As prober(): runs write the canary where they reach the pods directly.
	if f.probe.window() > 0 && f.probe.Mode == string(probe.Canary) && f.runsVia() == scrape.ViaDirect {
		d.Canary = f.probe.EndpointSlice
	}
	ctx, cancel := context.WithTimeout(parent, f.cluster.Timeout)
	defer cancel()
	rep := doctor.NewReport(f.cluster.Namespace, o.APIServer, d.Run(ctx))
	if err := f.output.print(stdout, rep, rep.WriteText); err != nil {
		return fmt.Errorf("print report: %w", err)
	}
	if !rep.OK {
		return fmt.Errorf("doctor: %d check(s) failed", rep.Failed)
	}
	return nil
}

package cli

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"

	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/metrics"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// PushOptions send a one-shot run's metrics to a Pushgateway (CronJob mode has no
// process for Prometheus to scrape).
type PushOptions struct {
	URL      string
	Job      string
	Grouping map[string]string
	Timeout  time.Duration
}

func (o *PushOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "pushgateway-url", "", "after each pass, push its metrics (the families watchdog run serves) to the Pushgateway at this `URL` (http or https, no credentials)")
	fs.StringVar(&o.Job, "pushgateway-job", "agentenv-scheduler-watchdog", "the job label (`name`) of the pushed group: each run replaces the previous run's metrics in it")
	fs.StringToStringVar(&o.Grouping, "pushgateway-grouping", nil, "more `label=value` pairs of the pushed group's key, e.g. namespace=agentenv-system (the chart sets job and namespace as its PodMonitor does)")
	fs.DurationVar(&o.Timeout, "pushgateway-timeout", 10*time.Second, "deadline of the push")
}

// Validate reports every invalid flag, in the order the flags are declared.
func (o *PushOptions) Validate() error {
	var p problems
	if o.URL != "" {
		if u, err := url.Parse(o.URL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			p.addf("--pushgateway-url %q: want an http(s) URL", o.URL)
		} else if u.User != nil {
			p.addf("--pushgateway-url: credentials in the URL are not supported")
		}
	}
	if o.Job == "" {
		p.addf("--pushgateway-job must not be empty")
	}
	for k, v := range o.Grouping {
		if !model.LegacyValidation.IsValidLabelName(k) || k == "job" || v == "" {
			p.addf("--pushgateway-grouping %s=%q: want a label name other than job, and a value", k, v)
		}
	}
	p.positive("--pushgateway-timeout", o.Timeout)
	return p.err()
}

// push sends the run's metrics unless no Pushgateway is set or the run is a dry
// run (which leaves no trace). The pushed counters carry running totals kept under
// statestore.MetricsKey in store's ConfigMap (metrics.Push).
func (o *PushOptions) push(ctx context.Context, rep *check.Report, runErr error, took time.Duration, sinks []string, dryRun bool, store *statestore.Store) error {
	if o.URL == "" || dryRun {
		return nil
	}
	m := metrics.New(metrics.Options{Sinks: sinks})
	m.Observe(rep, runErr, took, time.Now())
	return m.Push(ctx, metrics.PushConfig{URL: o.URL, Job: o.Job, Grouping: o.Grouping, Timeout: o.Timeout,
		Totals: func(ctx context.Context, f func(string) (string, error)) error {
			return store.UpdateKey(ctx, statestore.MetricsKey, f)
		}})
}

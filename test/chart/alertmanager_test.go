package chart

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestAlertmanagerValues: the Alertmanager URLs and credentials go into the Secret
// (the URLs comma-joined, as --alertmanager-url reads them) and reach the container
// through secretKeyRef; the TTL and generator URL are plain settings.
func TestAlertmanagerValues(t *testing.T) {
	r := render(t, `alerts:
  alertmanagerURLs: ["https://am-0.example.com/AMPATHTOKEN", "https://am-1.example.com"]
  alertmanagerBearerToken: AMBEARERTOKEN
  alertmanagerAlertTTL: 20m
  alertmanagerGeneratorURL: https://grafana.example.com/explore
`)
	var secret corev1.Secret
	r.one("Secret", &secret)
	if got := secret.StringData["alertmanager-url"]; got != "https://am-0.example.com/AMPATHTOKEN,https://am-1.example.com" {
		t.Errorf("Secret alertmanager-url = %q", got)
	}
	if got := secret.StringData["alertmanager-bearer-token"]; got != "AMBEARERTOKEN" {
		t.Errorf("Secret alertmanager-bearer-token = %q", got)
	}
	env := envOf(r.podSpec().Containers[0])
	for flag, key := range map[string]string{"ALERTMANAGER_URL": "alertmanager-url", "ALERTMANAGER_USERNAME": "alertmanager-username",
		"ALERTMANAGER_PASSWORD": "alertmanager-password", "ALERTMANAGER_BEARER_TOKEN": "alertmanager-bearer-token"} {
		e := env["WATCHDOG_"+flag]
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("WATCHDOG_%s = %+v, want secretKeyRef key %s", flag, e, key)
		}
	}
	if e := env["WATCHDOG_ALERTMANAGER_ALERT_TTL"]; e.Value != "20m" {
		t.Errorf("WATCHDOG_ALERTMANAGER_ALERT_TTL = %+v", e)
	}
	if e := env["WATCHDOG_ALERTMANAGER_GENERATOR_URL"]; e.Value != "https://grafana.example.com/explore" {
		t.Errorf("WATCHDOG_ALERTMANAGER_GENERATOR_URL = %+v", e)
	}
	for _, o := range r.objs {
		if o.GetKind() == "Secret" {
			continue
		}
		raw, err := o.MarshalJSON()
		must(t, err)
		for _, tok := range []string{"AMPATHTOKEN", "AMBEARERTOKEN"} {
			if strings.Contains(string(raw), tok) {
				t.Errorf("%s %s carries the secret %s", o.GetKind(), o.GetName(), tok)
			}
		}
	}

	for _, c := range []struct{ values, want string }{
		{"alerts: {alertmanagerURLs: ['am.example.com']}", "alertmanagerURLs"},
		{"alerts: {alertmanagerURLs: ['https://a.example.com,https://b.example.com']}", "alertmanagerURLs"},
		{"alerts: {alertmanagerAlertTTL: 0s}", "alertmanagerAlertTTL"},
		{"alerts: {existingSecret: mine, alertmanagerBearerToken: x}", "not both"},
	} {
		if out, err := renderErr(t, c.values); err == nil || !strings.Contains(out+err.Error(), c.want) {
			t.Errorf("%s: rendered (err %v), want a failure naming %s:\n%s", c.values, err, c.want, out)
		}
	}
}

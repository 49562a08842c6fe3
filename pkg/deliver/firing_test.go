package deliver

import (
	"testing"
)

// The matcher sets of --hold-restarts-on-alert read as Alertmanager writes them,
// and match as Alertmanager matches (regexes anchored, a missing label is "").
func TestParseMatchers(t *testing.T) {
	labels := map[string]string{"alertname": "etcdNoLeader", "severity": "critical", "job": "etcd, main"}
	for set, want := range map[string]bool{
		`alertname=~"etcd.*"`:                            true,
		`{alertname=~"etcd.*",severity="critical"}`:      true,
		`alertname=~etcd`:                                false, // anchored
		`alertname="etcdNoLeader", severity!="critical"`: false,
		`job="etcd, main"`:                               true, // a comma inside quotes
		`alertname!~"Kube.*",cluster=""`:                 true, // a missing label is ""
		`severity=critical`:                              true,
		`instance:up=""`:                                 true, // Alertmanager's names may hold ':'
	} {
		ms, err := ParseMatchers(set)
		if err != nil {
			t.Errorf("%s: %v", set, err)
			continue
		}
		got := true
		for _, m := range ms {
			got = got && m.Matches(labels[m.Name])
		}
		if got != want {
			t.Errorf("%s (%s) matches %v, want %v", set, ms, got, want)
		}
	}
	for _, bad := range []string{"", "{}", "alertname", `alertname=~"("`, `1x="a"`, `alertname=="a"`} {
		if _, err := ParseMatchers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

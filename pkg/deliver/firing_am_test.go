package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"

	"github.com/agentenv/watchdog/internal/testenv"
)

// The hold reads every firing alert a real Alertmanager holds that matches, even
// when the answer is larger than a delivery's answer ever is: during an incident
// many alerts fire at once, which is when the hold matters most. Swept over the
// number of alerts: the answer grows past the bound deliveries use.
func TestFiringReadsAlertmanagerWithManyAlerts(t *testing.T) {
	bin := os.Getenv(testenv.EnvAlertmanager)
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(testenv.EnvAlertmanager + " is not set (CI must run the tests that need it)")
		}
		t.Skip(testenv.EnvAlertmanager + " is not set: " + testenv.EnvAlertmanager + "=$(hack/alertmanager.sh --print)")
	}
	proc, err := testenv.StartAlertmanager(bin, "route:\n  receiver: blackhole\n  group_wait: 1h\nreceivers:\n  - name: blackhole\n", "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Stop)
	am, err := NewAlertmanager([]string{proc.Base}, 5*time.Second, 1, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hold := &AlertHold{Alertmanager: am, Sets: []amlabels.Matchers{mustMatchers(t, `alertname=~"etcd.*"`)}}
	posted := 0
	for _, total := range []int{1, 50, 200, 400} {
		var batch []PostableAlert
		for ; posted < total; posted++ {
			batch = append(batch, PostableAlert{
				Labels:      map[string]string{"alertname": "etcdMembersDown", "instance": fmt.Sprintf("etcd-%03d", posted), "severity": "critical"},
				Annotations: map[string]string{"description": strings.Repeat("members of the etcd cluster are down; ", 8)},
				StartsAt:    time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour),
			})
		}
		postAlerts(t, proc.Base, batch)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		read := hold.Read(ctx)
		cancel()
		if read.Err != nil {
			t.Errorf("%d alerts firing: the hold cannot read them: %v", total, read.Err)
			continue
		}
		if read.Count != total || len(read.Firing) != min(total, 5) {
			t.Errorf("%d alerts firing: the hold counted %d and named %d", total, read.Count, len(read.Firing))
		}
	}
}

func mustMatchers(t *testing.T, set string) amlabels.Matchers {
	t.Helper()
	ms, err := ParseMatchers(set)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// postAlerts posts alerts to Alertmanager as Prometheus would.
func postAlerts(t *testing.T, base string, alerts []PostableAlert) {
	t.Helper()
	body, err := json.Marshal(alerts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+AlertmanagerAPIPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post alerts: %s", resp.Status)
	}
}

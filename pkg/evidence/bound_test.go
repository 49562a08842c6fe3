package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/scrape"
)

// memoryConfigMaps keeps ConfigMaps in memory, as the API server would.
type memoryConfigMaps map[string]*corev1.ConfigMap

func (m memoryConfigMaps) GetConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	if cm, ok := m[name]; ok {
		return cm.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (m memoryConfigMaps) CreateConfigMap(_ context.Context, cm *corev1.ConfigMap, _ metav1.CreateOptions) (*corev1.ConfigMap, error) {
	m[cm.Name] = cm.DeepCopy()
	return cm, nil
}

func (m memoryConfigMaps) UpdateConfigMap(_ context.Context, cm *corev1.ConfigMap, _ metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	m[cm.Name] = cm.DeepCopy()
	return cm, nil
}

// hostileCapture is a bundle whose scheduler is out to make it as large as it
// can: a log of the characters JSON escapes the longest (<, >, & under HTML
// escaping; control bytes; invalid UTF-8), and a metrics page with thousands of
// made-up statuses of long names.
func hostileCapture(t *testing.T, k *Keeper, at time.Time) Bundle {
	t.Helper()
	var log strings.Builder
	for i := 0; log.Len() < 300<<10; i++ {
		fmt.Fprintf(&log, "line %d %s\n", i, strings.Repeat("<>&\x1b\xff", 40))
	}
	log.WriteString("the newest line\n")
	k.Logs = &kubeletLog{log: log.String()}
	observed := map[string]int{}
	for _, s := range scrape.ObservedStatuses {
		observed[s] = 1
	}
	for i := range 5000 {
		observed[fmt.Sprintf("%03d%s", i, strings.Repeat("<", 200))] = i
	}
	obs := decide.Observation{Pods: []decide.Pod{{Name: "sched", UID: "u1", Sample: &scrape.Sample{Observed: observed}}}}
	return k.Capture(context.Background(), decide.Target{Pod: "sched", UID: "u1", Reason: "wedged"}, obs, "restart", at)
}

// TestBundleBoundedWithHostileInput: whatever the scheduler's log and metrics
// hold, a bundle is saved within MaxBundleBytes, with the newest end of its log,
// only the statuses the scheduler is known to write, and JSON that escapes no
// more than JSON must; so the ring keeps its MaxBundles newest bundles instead of
// dropping older ones for size.
func TestBundleBoundedWithHostileInput(t *testing.T) {
	cms := memoryConfigMaps{}
	k := &Keeper{ConfigMaps: cms, Namespace: "ns", ConfigMap: "evidence", Container: "scheduler"}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range MaxBundles {
		if err := k.Save(context.Background(), hostileCapture(t, k, t0.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	data := cms["evidence"].Data
	if len(data) != MaxBundles {
		t.Errorf("the ring keeps %d of %d bundles", len(data), MaxBundles)
	}
	for key, raw := range data {
		if len(raw) > MaxBundleBytes {
			t.Errorf("%s: %d bytes, bound %d", key, len(raw), MaxBundleBytes)
		}
		if strings.Contains(raw, `\u003c`) || strings.Contains(raw, `\u0026`) {
			t.Errorf("%s: HTML-escaped JSON", key)
		}
		var b Bundle
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !strings.HasSuffix(b.Log, "the newest line\n") || len(b.Log) < 8<<10 {
			t.Errorf("%s: kept %d bytes of log, ending %q; want the newest end", key, len(b.Log), b.Log[max(0, len(b.Log)-20):])
		}
		if b.Sample == nil || len(b.Sample.Observed) != len(scrape.ObservedStatuses) {
			t.Errorf("%s: %d statuses kept, want the %d known ones", key, len(b.Sample.Observed), len(scrape.ObservedStatuses))
		}
		t.Logf("%s: %d bytes, log %d bytes, warnings %q", key, len(raw), len(b.Log), b.Warnings)
	}
}

// A bundle too large with its log cut to nothing (a gate detail quoting a giant
// annotation, thousands of gates) is still saved, whatever its log: its texts
// and lists are cut short, each cut text marked.
func TestBundleBoundedWithGiantTexts(t *testing.T) {
	cms := memoryConfigMaps{}
	k := &Keeper{ConfigMaps: cms, Namespace: "ns", ConfigMap: "evidence", Container: "scheduler"}
	for _, logSize := range []int{0, 100, 60 << 10} {
		b := Bundle{Key: Key(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), "sched"), Pod: "sched", UID: "u1",
			Reason: strings.Repeat("r", 200<<10), Log: strings.Repeat("line\n", logSize/5)}
		for i := range 5000 {
			b.Gates = append(b.Gates, decide.Gate{Name: fmt.Sprint("gate ", i), Detail: strings.Repeat("d", 1<<10)})
		}
		if err := k.Save(context.Background(), b); err != nil {
			t.Fatalf("log of %d bytes: %v", logSize, err)
		}
		raw := cms["evidence"].Data[b.Key]
		var got Bundle
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		if len(raw) > MaxBundleBytes || len(got.Reason) > 1<<10 || !strings.HasSuffix(got.Reason, "...") || len(got.Gates) > 20 {
			t.Errorf("log of %d bytes: %d bytes saved, reason %d bytes (marked cut: %v), %d gates",
				logSize, len(raw), len(got.Reason), strings.HasSuffix(got.Reason, "..."), len(got.Gates))
		}
	}
}

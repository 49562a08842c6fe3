// Package evidence keeps what the scheduler looked like just before the watchdog
// restarted it (or would have), in a ConfigMap ring (docs/alerts.md, "Evidence").
package evidence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/endpoints"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// Bounds: a ring of bundles fits a ConfigMap far below the API server's 1 MiB object limit; a
// capture (the log read) and its save run just before a restart and must not hold it up.
const (
	DefaultLogLines = 200
	DefaultLogBytes = 64 << 10
	MaxLogRead      = 1 << 20  // the limitBytes of one log read
	MaxBundles      = 5        // the ring keeps the newest
	MaxBundleBytes  = 96 << 10 // one encoded bundle: the log's oldest part is cut to fit
	maxRingBytes    = 640 << 10
	DefaultTimeout  = 5 * time.Second // a capture
	SaveTimeout     = 2 * time.Second
)

// Component is the app.kubernetes.io/component label of the evidence ConfigMap.
const Component = "restart-evidence"

// Bundle is the evidence of one restart.
type Bundle struct {
	Key      string         `json:"key"`
	At       time.Time      `json:"at"`
	Pod      string         `json:"pod"`
	UID      string         `json:"uid"`
	Action   string         `json:"action"` // restart, or would-restart in shadow mode
	Verdict  state.Verdict  `json:"verdict"`
	Evidence state.Evidence `json:"evidence,omitempty"`
	Reason   string         `json:"reason"`
	Gates    []decide.Gate  `json:"gates,omitempty"`
	Sample   *scrape.Sample `json:"sample,omitempty"` // the metrics the decision judged
	// Endpoints is the serving node count the API server gave (what ready should be).
	Endpoints *endpoints.Count `json:"endpoints,omitempty"`
	Status    PodStatus        `json:"podStatus"`
	Log       string           `json:"log,omitempty"` // its last lines; LogError says why there are none
	LogError  string           `json:"logError,omitempty"`
	Warnings  []string         `json:"warnings,omitempty"`
	// Integrity says, when read back (Load), whether the seal verifies. Never saved.
	Integrity Integrity `json:"integrity,omitempty"`
}

// PodStatus is the part of the pod's status a person asks about after the fact.
type PodStatus struct {
	Phase         string    `json:"phase"`
	Ready         bool      `json:"ready"`
	Running       bool      `json:"running"`
	StartedAt     time.Time `json:"startedAt,omitzero"`
	WaitingReason string    `json:"waitingReason,omitempty"`
	Controller    string    `json:"controller,omitempty"`
}

// LogReader reads a container's log through the API server (pods/log).
type LogReader interface {
	PodLog(ctx context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)
}

// ConfigMaps reads and writes the evidence ConfigMap.
type ConfigMaps interface {
	GetConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	UpdateConfigMap(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
}

// Keeper captures bundles and keeps them in its ConfigMap.
type Keeper struct {
	Logs       LogReader // nil: no log is read (--evidence-logs=false)
	ConfigMaps ConfigMaps
	Namespace  string
	ConfigMap  string
	Container  string
	Key        []byte // seals every bundle saved (seal.go); empty: unsealed
}

// Capture builds t's bundle; what it could not read is said in it (LogError, Warnings).
func (k *Keeper) Capture(ctx context.Context, t decide.Target, obs decide.Observation, action string, now time.Time) Bundle {
	b := Bundle{Key: Key(now, t.Pod), At: now.UTC(), Pod: t.Pod, UID: t.UID, Action: action,
		Verdict: t.Verdict, Evidence: t.Evidence, Reason: t.Reason, Gates: t.Gates}
	if obs.ExpectedErr == nil {
		b.Endpoints = ptr.To(obs.Expected)
	}
	for _, p := range obs.Pods {
		if p.UID != t.UID {
			continue
		}
		b.Sample = knownStatuses(p.Sample, &b)
		b.Status = PodStatus{Phase: p.Phase, Ready: p.Ready, Running: p.Running, StartedAt: p.StartedAt.UTC(), WaitingReason: p.WaitingReason}
		if p.ControllerName != "" {
			b.Status.Controller = p.ControllerKind + "/" + p.ControllerName
		}
	}
	if k.Logs == nil {
		b.LogError = "not read: --evidence-logs=false"
		return b
	}
	var err error
	if b.Log, err = k.readLog(ctx, t.Pod); err != nil {
		b.LogError = err.Error()
	}
	return b
}

// knownStatuses is a copy of sample with only the statuses the scheduler is known
// to write: thousands of made-up ones must not make the bundle too large to save.
func knownStatuses(sample *scrape.Sample, b *Bundle) *scrape.Sample {
	if sample == nil {
		return nil
	}
	c := *sample
	c.Observed = make(map[string]int, len(scrape.ObservedStatuses))
	for _, status := range scrape.ObservedStatuses {
		if n, ok := sample.Observed[status]; ok {
			c.Observed[status] = n
		}
	}
	if other := len(sample.Observed) - len(c.Observed); other > 0 {
		b.Warnings = append(b.Warnings, fmt.Sprintf("%d observed_nodes series of statuses the scheduler is not known to write were not kept", other))
	}
	return &c
}

// encode is the bundle as saved: JSON without HTML escaping (a log of <, > and & would grow sixfold),
// within MaxBundleBytes: cut from the log's oldest part first, then the rest (shortened) if needed.
func encode(b Bundle) ([]byte, error) {
	warnings := slices.Clip(b.Warnings) // the caller's bundle keeps its own
	for short := false; ; {
		raw, err := marshal(b)
		if err != nil {
			return nil, err
		}
		over := len(raw) - MaxBundleBytes
		switch {
		case over <= 0:
			return raw, nil
		case b.Log != "":
			// Drop what is over in the proportion the log grows escaped, and a
			// little more for the warning; the loop cuts again if not enough.
			grown, _ := marshal(b.Log) // a string always encodes
			drop := (over + 200) * len(b.Log) / len(grown)
			b.Log = string(keepEnd([]byte(b.Log), max(int64(len(b.Log)-drop-1), 0)))
			b.Warnings = append(warnings, fmt.Sprintf("log cut to its newest %d bytes to keep the bundle within %d bytes",
				len(b.Log), MaxBundleBytes))
		case !short:
			b, short = b.shortened(), true
		default:
			return nil, fmt.Errorf("encode evidence: %d bytes with nothing left to cut (bound %d)", len(raw), MaxBundleBytes)
		}
	}
}

// marshal is v as JSON without HTML escaping: the bytes sealed.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode evidence: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// shortened cuts every text of b to 1 KiB and every list to 20 entries.
func (b Bundle) shortened() Bundle {
	const text, list = 1 << 10, 20
	cut := func(s *string) { *s = state.Truncate(*s, text) }
	for _, p := range []*string{&b.Reason, &b.LogError, &b.Status.Phase, &b.Status.WaitingReason, &b.Status.Controller} {
		cut(p)
	}
	b.Gates = slices.Clone(b.Gates[:min(len(b.Gates), list)])
	for i := range b.Gates {
		cut(&b.Gates[i].Name)
		cut(&b.Gates[i].Detail)
	}
	texts := func(l []string) []string {
		l = slices.Clone(l[:min(len(l), list)])
		for i := range l {
			cut(&l[i])
		}
		return l
	}
	b.Warnings = texts(b.Warnings)
	if b.Sample != nil {
		s := *b.Sample
		s.Warnings = texts(s.Warnings)
		b.Sample = &s
	}
	return b
}

// readLog keeps the newest DefaultLogBytes of the last DefaultLogLines lines, from a line's start. The
// kubelet counts limitBytes from the oldest line: MaxLogRead is asked for, fewer lines if they fill it.
func (k *Keeper) readLog(ctx context.Context, pod string) (string, error) {
	lines, keep := int64(DefaultLogLines), int64(DefaultLogBytes)
	read := max(keep, MaxLogRead)
	for {
		opts := &corev1.PodLogOptions{Container: k.Container, TailLines: &lines, LimitBytes: &read}
		rc, err := k.Logs.PodLog(ctx, k.Namespace, pod, opts)
		if err != nil {
			return "", fmt.Errorf("read the log of %s/%s (pods/log): %w", pod, k.Container, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, read))
		rc.Close()
		if err != nil {
			return string(keepEnd(b, keep)), fmt.Errorf("read the log of %s/%s: %w", pod, k.Container, err)
		}
		if int64(len(b)) < read || lines == 1 {
			return string(keepEnd(b, keep)), nil
		}
		lines = max(1, lines/4)
	}
}

// keepEnd is the end of b, at most n bytes, from a line's start if one begins in it (else a character's).
func keepEnd(b []byte, n int64) []byte {
	if int64(len(b)) <= n {
		return b
	}
	cut := len(b) - int(n)
	if i := bytes.IndexByte(b[cut-1:len(b)-1], '\n'); i >= 0 { // a line starts at cut+i, before b's end
		return b[cut+i:]
	}
	end := b[cut:]
	for len(end) > 0 && !utf8.RuneStart(end[0]) {
		end = end[1:]
	}
	return end
}

// Key names a bundle in the ConfigMap: its time first, so that keys sort by age.
func Key(at time.Time, pod string) string {
	return at.UTC().Format("20060102T150405Z") + "-" + pod + ".json"
}

// Save puts b into the ConfigMap (created if missing), keeping the newest
// MaxBundles bundles. Only the pass holding the Lease writes it: no conflict to retry.
func (k *Keeper) Save(ctx context.Context, b Bundle) error {
	b.Integrity = ""
	raw, err := encode(b)
	if err != nil {
		return err
	}
	if len(k.Key) > 0 {
		if raw, err = marshal(envelope{Seal: seal(k.Key, k.Namespace, b.Key, raw), Bundle: raw}); err != nil {
			return err
		}
	}
	cm, err := k.ConfigMaps.GetConfigMap(ctx, k.Namespace, k.ConfigMap)
	missing := apierrors.IsNotFound(err)
	if missing {
		cm, err = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.ConfigMap, Namespace: k.Namespace,
			Labels: map[string]string{"app.kubernetes.io/component": Component,
				"app.kubernetes.io/managed-by": "agentenv-scheduler-watchdog"}}}, nil
	}
	if err != nil {
		return fmt.Errorf("read evidence ConfigMap %s/%s: %w", k.Namespace, k.ConfigMap, err)
	}
	cm.Data = ring(cm.Data, b.Key, string(raw))
	if missing {
		_, err = k.ConfigMaps.CreateConfigMap(ctx, cm, metav1.CreateOptions{})
	} else {
		_, err = k.ConfigMaps.UpdateConfigMap(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write evidence ConfigMap %s/%s: %w", k.Namespace, k.ConfigMap, err)
	}
	return nil
}

// ring adds key to data, dropping the oldest bundles beyond the bounds (other keys kept).
func ring(data map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(data)+1)
	maps.Copy(out, data)
	out[key] = value
	var keys []string
	size := 0
	for k, v := range out {
		if strings.HasSuffix(k, ".json") {
			keys = append(keys, k)
			size += len(k) + len(v)
		}
	}
	slices.Sort(keys) // oldest first
	for len(keys) > 1 && (len(keys) > MaxBundles || size > maxRingBytes) {
		size -= len(keys[0]) + len(out[keys[0]])
		delete(out, keys[0])
		keys = keys[1:]
	}
	return out
}

// Load reads the bundles of the ConfigMap, newest first, each with its Integrity
// under key; one that does not decode is skipped and named in the error.
func Load(ctx context.Context, cms ConfigMaps, ns, name string, key []byte) ([]Bundle, error) {
	cm, err := cms.GetConfigMap(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read evidence ConfigMap %s/%s: %w", ns, name, err)
	}
	var out []Bundle
	var errs []error
	for k, v := range cm.Data {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		b, err := Open(key, ns, k, []byte(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("bundle %s: %w", k, err))
			continue
		}
		b.Key = k
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Bundle) int { return strings.Compare(b.Key, a.Key) })
	return out, errors.Join(errs...)
}

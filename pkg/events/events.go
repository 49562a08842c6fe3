// Package events leaves Events on the objects judged, for `kubectl describe`.
// Synchronously: a CronJob's process exits right after, losing a buffered recorder's.
package events

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/state"
)

const (
	// ReasonAlertFailed marks a failed alert delivery (alert.Events has the alerts' own).
	ReasonAlertFailed = "WatchdogAlertFailed"
	Component         = "agentenv-scheduler-watchdog" // the Event source
	maxMessage        = 1024                          // the API server's limit
)

// Recorder creates Events.
type Recorder struct {
	Client    *kube.Client
	Namespace string
	Host      string
	Now       func() time.Time
}

// Emit creates one Event about obj. obj needs Kind, Name, Namespace and UID.
func (r *Recorder) Emit(ctx context.Context, obj corev1.ObjectReference, eventType, reason, message string) error {
	now := metav1.NewTime(r.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", obj.Name, now.UnixNano()),
			Namespace: r.Namespace,
		},
		InvolvedObject:      obj,
		Reason:              reason,
		Message:             state.Truncate(message, maxMessage), // the API server rejects invalid UTF-8
		Type:                eventType,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Source:              corev1.EventSource{Component: Component, Host: r.Host},
		ReportingController: "agentenv.io/watchdog",
		ReportingInstance:   r.Host,
	}
	if _, err := r.Client.CreateEvent(ctx, ev); err != nil {
		return fmt.Errorf("create %s Event %s on %s %s/%s: %w", eventType, reason, obj.Kind, obj.Namespace, obj.Name, err)
	}
	return nil
}

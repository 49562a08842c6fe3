package kube

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KeyData is the key's data key in its Secret (--key-secret).
const KeyData = "key"

// ManagedBy labels what the watchdog creates itself (app.kubernetes.io/managed-by).
const ManagedBy = "agentenv-scheduler-watchdog"

// EnsureKey returns the key of Secret ns/name (the outbox's and the evidence seal's),
// creating it when missing with legacy (0.1.0's --outbox-key: an upgrade keeps its
// key) or 32 random bytes. No chart renders it, so no re-render or sync rotates it.
func EnsureKey(ctx context.Context, c *Client, ns, name string, legacy []byte) ([]byte, error) {
	key, err := ReadKey(ctx, c, ns, name)
	if err != nil || key != nil {
		return key, err
	}
	key = legacy
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": ManagedBy}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{KeyData: key},
	}
	err = c.core.Post().Namespace(ns).Resource("secrets").Body(s).Do(ctx).Error()
	if apierrors.IsAlreadyExists(err) {
		return ReadKey(ctx, c, ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("create the key Secret %s/%s: %w", ns, name, err)
	}
	return key, nil
}

// ReadKey returns the key of Secret ns/name, nil if the Secret does not exist (a dry
// run reads, never creates). A Secret without the key is an error: it is not ours.
func ReadKey(ctx context.Context, c *Client, ns, name string) ([]byte, error) {
	s, err := into[corev1.Secret](ctx, c.core.Get().Namespace(ns).Resource("secrets").Name(name))
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the key Secret %s/%s: %w", ns, name, err)
	case len(s.Data[KeyData]) < 32:
		return nil, fmt.Errorf("the key Secret %s/%s has no %q of at least 32 bytes", ns, name, KeyData)
	}
	return s.Data[KeyData], nil
}
